// ShardSpec::pieces: a flat range of a shard as boxes, checked element by element against the
// shard's own local -> global index map, for plain, split and fused-group shards.
#include <gtest/gtest.h>

#include "braid/nn/shard_spec.h"
#include "support/test_util.h"

namespace braid::nn {
namespace {

// The global indices a piece holds, in its row-major order.
std::vector<int64_t> indices_of(const ShardSpec& piece) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < piece.local_numel(); ++i) out.push_back(piece.global_index(i));
  return out;
}

void expect_pieces_cover(const ShardSpec& shard, int64_t begin, int64_t length) {
  const std::vector<ShardSpec> pieces = shard.pieces(begin, length);
  std::vector<int64_t> got;
  for (const ShardSpec& p : pieces) {
    EXPECT_EQ(p.global_shape, shard.global_shape);
    EXPECT_EQ(p.block_shape, shard.block_shape);
    const std::vector<int64_t> part = indices_of(p);
    got.insert(got.end(), part.begin(), part.end());
  }
  std::vector<int64_t> want;
  for (int64_t i = begin; i < begin + length; ++i) want.push_back(shard.global_index(i));
  EXPECT_EQ(got, want) << shard.str() << " [" << begin << ", " << begin + length << ")";
  EXPECT_LE(pieces.size(), 2 * shard.sizes.size() - 1) << shard.str();
}

TEST(ShardSpecPieces, EveryRangeOfEveryShardIsCoveredInOrder) {
  const std::vector<ShardSpec> shards = {
      ShardSpec::whole({7}),
      ShardSpec::whole({5, 6}),
      ShardSpec::split({8, 6}, 1, 3, 1),             // columns 2..3 of every row
      ShardSpec::split_groups({12, 4}, 0, 3, 2, 1),  // fused [q | k | v], second half of each
      ShardSpec::box({4, 5, 6}, {1, 2, 1}, {3, 2, 4}),
  };
  for (const ShardSpec& shard : shards) {
    const int64_t n = shard.local_numel();
    for (int64_t begin = 0; begin < n; ++begin)
      for (int64_t length = 0; begin + length <= n; ++length)
        expect_pieces_cover(shard, begin, length);
  }
}

TEST(ShardSpecPieces, TheWholeShardIsItselfAndAnEmptyRangeIsNothing) {
  const ShardSpec shard = ShardSpec::split({8, 6}, 0, 2, 1);
  const std::vector<ShardSpec> whole = shard.pieces(0, shard.local_numel());
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].offsets, shard.offsets);
  EXPECT_EQ(whole[0].sizes, shard.sizes);
  EXPECT_TRUE(shard.pieces(5, 0).empty());
}

TEST(ShardSpecPieces, ARangeOutsideTheShardIsAnError) {
  const ShardSpec shard = ShardSpec::whole({3, 4});
  EXPECT_ERROR_CONTAINS(shard.pieces(10, 3), "not inside shard");
  EXPECT_ERROR_CONTAINS(shard.pieces(-1, 2), "not inside shard");
}

}  // namespace
}  // namespace braid::nn
