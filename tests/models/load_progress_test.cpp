// The load progress bar: its text, and that it stays silent when stderr is not a terminal
// (as under ctest, where stderr is a pipe or file).
#include <gtest/gtest.h>

#include <unistd.h>

#include "models/load_progress.h"

namespace brigade {
namespace {

TEST(LoadProgress, BarText) {
  EXPECT_EQ(format_load_progress("m", 0, 4, 0, 8), "loading m [>       ] 0/4 layers, 0.00 GiB");
  EXPECT_EQ(format_load_progress("m", 2, 4, int64_t{3} << 29, 8), "loading m [====>   ] 2/4 layers, 1.50 GiB");
  EXPECT_EQ(format_load_progress("m", 4, 4, 0, 8), "loading m [========] 4/4 layers, 0.00 GiB");
  EXPECT_EQ(format_load_progress("m", 9, 0, 0, 4), "loading m [====] 1/1 layers, 0.00 GiB") << "clamped";
}

TEST(LoadProgress, SilentUnlessATerminal) {
  LoadProgress off("/models/x", 10, /*wanted=*/false);
  EXPECT_FALSE(off.enabled());
  LoadProgress auto_detect("/models/x", 10, /*wanted=*/true);
  EXPECT_EQ(auto_detect.enabled(), ::isatty(STDERR_FILENO) != 0);
}

}  // namespace
}  // namespace brigade
