// coordinators/group/test_topics.h
//
// Topic ids for the assignor and reconciliation tests.
#pragma once

#include <cstdint>

#include "coordinators/group/assignors.h"

namespace brook::group {

// The topic id whose last byte is n (and the rest zero).
inline TopicId test_topic(uint8_t n) {
  TopicId id;
  id.bytes[15] = n;
  return id;
}

}  // namespace brook::group
