// net/kafka/errors.cc
#include "net/kafka/errors.h"

namespace brook::net {

std::string_view error_name(int16_t code) {
  switch (code) {
#define BROOK_KAFKA_ERROR_NAME(code, Name, NAME, retriable) \
  case code:                                              \
    return #NAME;
    BROOK_KAFKA_ERRORS(BROOK_KAFKA_ERROR_NAME)
#undef BROOK_KAFKA_ERROR_NAME
    default:
      return "UNKNOWN_ERROR_CODE";
  }
}

bool error_retriable(int16_t code) {
  switch (code) {
#define BROOK_KAFKA_ERROR_RETRIABLE(code, Name, NAME, retriable) \
  case code:                                                   \
    return retriable;
    BROOK_KAFKA_ERRORS(BROOK_KAFKA_ERROR_RETRIABLE)
#undef BROOK_KAFKA_ERROR_RETRIABLE
    default:
      return false;
  }
}

}  // namespace brook::net
