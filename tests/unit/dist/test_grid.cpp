// ParallelGrid without MPI: layout errors that say what would fit, coordinates and groups of
// a one-rank world, chunk arithmetic of reduce_scatter/all_gather.
#include <gtest/gtest.h>

#include "braid/dist/parallel_grid.h"
#include "braid/dist/solo_process_group.h"
#include "support/test_util.h"

namespace braid::dist {
namespace {

TEST(GridLayout, WorldNotEqualToTheProductSaysWhichDpFits) {
  const std::string p = ParallelGrid::layout_problem(8, ParallelGrid::default_axes(2, 1, 3, 1));
  EXPECT_NE(p.find("needs 6 ranks but the job has 8"), std::string::npos) << p;
  EXPECT_NE(p.find("dp=4 would fit"), std::string::npos) << p;
}

TEST(GridLayout, OtherAxesThatDoNotDivideListTheDivisors) {
  const std::string p = ParallelGrid::layout_problem(6, ParallelGrid::default_axes(4, 1, 1, 1));
  EXPECT_NE(p.find("(4) must divide 6"), std::string::npos) << p;
  EXPECT_NE(p.find("1, 2, 3, 6"), std::string::npos) << p;
}

TEST(GridLayout, AxisOfZeroAndRepeatedNamesAreRejected) {
  EXPECT_NE(ParallelGrid::layout_problem(1, {{"tp", 0}}).find("size >= 1"), std::string::npos);
  EXPECT_NE(ParallelGrid::layout_problem(1, {{"tp", 1}, {"tp", 1}}).find("appears twice"),
            std::string::npos);
  EXPECT_EQ(ParallelGrid::layout_problem(12, ParallelGrid::default_axes(2, 1, 3, 2)), "");
}

TEST(GridLayout, ConstructorThrowsTheSameMessage) {
  auto world = std::make_shared<SoloProcessGroup>();
  EXPECT_ERROR_CONTAINS(ParallelGrid(world, ParallelGrid::default_axes(1, 1, 2, 1)),
                        "needs 2 ranks but the job has 1");
}

TEST(GridLayout, OneRankWorldHasEveryAxisOfSizeOne) {
  ParallelGrid grid(std::make_shared<SoloProcessGroup>(), ParallelGrid::default_axes(1, 1, 1, 1));
  for (const char* axis : {"tp", "cp", "dp", "pp"}) {
    EXPECT_EQ(grid.size(axis), 1);
    EXPECT_EQ(grid.coord(axis), 0);
    ASSERT_NE(grid.group(axis), nullptr);
    EXPECT_EQ(grid.group(axis)->size(), 1);
  }
  EXPECT_EQ(grid.describe(), "single");
  EXPECT_ERROR_CONTAINS(grid.size("ep"), "no axis 'ep'");
}

TEST(Chunks, UnevenSplitsCoverTheBufferInOrder) {
  for (int64_t total : {0, 1, 7, 13, 64}) {
    for (int parts : {1, 2, 3, 4}) {
      int64_t covered = 0;
      for (int r = 0; r < parts; ++r) {
        EXPECT_EQ(chunk_offset(total, parts, r), covered);
        const int64_t size = chunk_size(total, parts, r);
        EXPECT_LE(size - chunk_size(total, parts, parts - 1), 1);
        covered += size;
      }
      EXPECT_EQ(covered, total) << total << " over " << parts;
    }
  }
}

}  // namespace
}  // namespace braid::dist
