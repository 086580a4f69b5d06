#include <gtest/gtest.h>

#include "engine/stop_matcher.h"

namespace tandem {
namespace stop_matcher_test {

// Feeds pieces one by one and returns everything emitted.
std::string feed(StopMatcher& m, std::initializer_list<const char*> pieces) {
  std::string out;
  for (auto* p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopMatcher, NoStopsEmitsEverythingAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello"), "hello");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcher, StopAcrossPiecesIsNeverEmitted) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("abc</"), "abc");  // "</" may start the stop string
  EXPECT_EQ(m.push("en"), "");
  EXPECT_EQ(m.push("d> tail"), "");
  EXPECT_EQ(m.flush(), "");
  EXPECT_EQ(m.matched(), "</end>");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(feed(m, {"ST", "OX", "Y"}), "STOXY");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(m.push("hello world"), "hel");
  EXPECT_EQ(m.matched(), "lo");
}

}  // namespace stop_matcher_test
}  // namespace tandem
