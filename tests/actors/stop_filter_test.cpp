#include "actors/tokenizer/stop_filter.h"

#include <gtest/gtest.h>

namespace brigade {
namespace {

TEST(StopFilter, PassesTextWithoutStops) {
  StopFilter f({});
  EXPECT_EQ(f.push("hello "), "hello ");
  EXPECT_EQ(f.push("world"), "world");
  EXPECT_EQ(f.flush(), "");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, NeverStreamsAPartialStop) {
  StopFilter f({"END"});
  EXPECT_EQ(f.push("abc E"), "abc ");
  EXPECT_EQ(f.push("N"), "");
  EXPECT_EQ(f.push("D tail"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("more"), "");
}

// Text passed before min_tokens is never matched, even where a later push completes a stop.
TEST(StopFilter, PassedTextIsNeverMatched) {
  StopFilter f({"END"});
  EXPECT_EQ(f.pass("xEND E"), "xEND E");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.push("ND"), "ND") << "matching starts with the pushed text";
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.push(" END!"), " ");
  EXPECT_TRUE(f.stopped());
}

TEST(StopFilter, ReleasesAFalseStart) {
  StopFilter f({"END"});
  EXPECT_EQ(f.push("xE"), "x");
  EXPECT_EQ(f.push("NX"), "ENX");
  EXPECT_EQ(f.push("EN"), "");
  EXPECT_EQ(f.flush(), "EN");
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, EarliestOfSeveralStops) {
  StopFilter f({"world", "lo w"});
  EXPECT_EQ(f.push("hello world"), "hel");
  EXPECT_TRUE(f.stopped());
}

// vLLM's include_stop_str_in_output: the stop that ended the text comes with it, once whole.
TEST(StopFilter, IncludedStopEndsTheText) {
  StopFilter f({"world", "lo w"}, /*include=*/true);
  EXPECT_EQ(f.push("hello"), "hel") << "'lo' may start a stop: held back";
  EXPECT_EQ(f.push(" world"), "lo w");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("more"), "");
  StopFilter g({"END"}, true);
  EXPECT_EQ(g.push("aEN"), "a");
  EXPECT_EQ(g.push("Dz"), "END") << "the text after the stop is not";
}

}  // namespace
}  // namespace brigade
