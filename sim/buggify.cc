// sim/buggify.cc
#include "sim/buggify.h"

#include "io/assert.h"

namespace brook::sim {

bool BuggifyState::fire(std::string_view point) {
  if (!enabled_) return false;
  auto it = points_.find(point);
  if (it == points_.end()) {
    BROOK_ASSERT_LT(points_.size(), kBuggifyPointsMax);
    const bool active = random_.bernoulli(kBuggifyActivateProbability);
    it = points_.emplace(std::string(point), active).first;
  }
  if (!it->second) return false;
  const bool fired = random_.bernoulli(kBuggifyFireProbability);
  fired_ += fired ? 1 : 0;
  return fired;
}

}  // namespace brook::sim
