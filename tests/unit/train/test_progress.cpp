// Tests for progress_bar_wanted: BRAID_PROGRESS, MPI launchers and the terminal, every case.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "braid/train/metrics.h"
#include "support/test_util.h"

namespace braid::train {
namespace {

using braid::testing::contains;
using braid::testing::error_of;

// progress_bar_wanted over a fixed environment instead of the process's.
bool wanted(const std::map<std::string, std::string>& vars, bool terminal) {
  return progress_bar_wanted(
      [&](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      terminal);
}

constexpr const char* kLauncherVars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                         "SLURM_PROCID"};

TEST(ProgressBarWanted, WithoutLauncherFollowsTheTerminal) {
  EXPECT_TRUE(wanted({}, true));
  EXPECT_FALSE(wanted({}, false));
  // Variables that only look similar are not a launcher.
  EXPECT_TRUE(wanted({{"OMPI_MCA_btl", "self"}, {"SLURM_JOB_ID", "7"}}, true));
}

TEST(ProgressBarWanted, UnderALauncherDrawsNothing) {
  for (const char* var : kLauncherVars) {
    EXPECT_FALSE(wanted({{var, "0"}}, true)) << var;
    EXPECT_FALSE(wanted({{var, "0"}}, false)) << var;
  }
}

TEST(ProgressBarWanted, BraidProgressWinsEverywhere) {
  for (const bool terminal : {true, false}) {
    EXPECT_TRUE(wanted({{"BRAID_PROGRESS", "1"}}, terminal));
    EXPECT_FALSE(wanted({{"BRAID_PROGRESS", "0"}}, terminal));
    for (const char* var : kLauncherVars) {
      EXPECT_TRUE(wanted({{"BRAID_PROGRESS", "1"}, {var, "3"}}, terminal)) << var;
      EXPECT_FALSE(wanted({{"BRAID_PROGRESS", "0"}, {var, "3"}}, terminal)) << var;
    }
  }
}

TEST(ProgressBarWanted, EmptyBraidProgressCountsAsUnset) {
  EXPECT_TRUE(wanted({{"BRAID_PROGRESS", ""}}, true));
  EXPECT_FALSE(wanted({{"BRAID_PROGRESS", ""}}, false));
  EXPECT_FALSE(wanted({{"BRAID_PROGRESS", ""}, {"PMIX_RANK", "0"}}, true));
}

TEST(ProgressBarWanted, OtherValuesAreAnError) {
  for (const char* value : {"yes", "2", "true", " 1"}) {
    EXPECT_TRUE(contains(error_of([&] {
                           wanted({{"BRAID_PROGRESS", value}}, true);
                         }),
                         "BRAID_PROGRESS must be 1"))
        << value;
  }
}

}  // namespace
}  // namespace braid::train
