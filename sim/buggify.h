// sim/buggify.h
//
// buggify(point) with FoundationDB's semantics: in each run, the first time a
// call site (named by its point string) is reached it is activated with
// probability kActivateProbability, once for the whole run; an active site
// then fires with probability kFireProbability on every call. A run may have
// buggify switched off entirely (BuggifyMode::kSeeded turns it on for
// kSeededOnRatio of seeds). Decisions come from one Random stream forked from
// the world seed and are kept in an ordered map keyed by point name, so a run
// is a pure function of its seed; nothing iterates in hash order.
//
// Only the simulator provides a Buggify: in production Context::buggify() is
// always false.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "io/context.h"
#include "io/random.h"

namespace brook::sim {

enum class BuggifyMode {
  kOff,     // never fires
  kOn,      // sites activate and fire with the probabilities below
  kSeeded,  // on or off, chosen from the seed (on in kSeededOnRatio of runs)
};

inline constexpr double kBuggifyActivateProbability = 0.25;
inline constexpr double kBuggifyFireProbability = 0.25;
inline constexpr double kBuggifySeededOnRatio = 0.8;
// A bound on distinct points, so a point name built from data cannot grow
// the map without limit.
inline constexpr size_t kBuggifyPointsMax = 100'000;

// The per-run state shared by every node of a World.
class BuggifyState {
 public:
  BuggifyState(io::Random random, bool enabled) : random_(random), enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  bool fire(std::string_view point);

  // For reports: every point reached so far and whether it is active.
  const std::map<std::string, bool, std::less<>>& points() const { return points_; }
  uint64_t fired() const { return fired_; }

 private:
  io::Random random_;
  bool enabled_;
  std::map<std::string, bool, std::less<>> points_;
  uint64_t fired_ = 0;
};

// A node's view (the io::Buggify in its Context): forwards to the world's
// state and counts what fired on this node.
class NodeBuggify final : public io::Buggify {
 public:
  explicit NodeBuggify(BuggifyState* state) : state_(state) {}
  bool fire(std::string_view point) override {
    const bool fired = state_->fire(point);
    fired_ += fired ? 1 : 0;
    return fired;
  }
  uint64_t fired() const { return fired_; }

 private:
  BuggifyState* state_;
  uint64_t fired_ = 0;
};

}  // namespace brook::sim
