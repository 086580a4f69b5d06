// A check shared by the parser tests: `fn` must throw a 400 ApiError naming `param`.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "server/common/api_error.h"

namespace tandem::server {

inline void expect_400(const std::function<void()>& fn, const std::string& param) {
  try {
    fn();
    ADD_FAILURE() << "expected a 400 for " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), param) << e.what();
  }
}

}  // namespace tandem::server
