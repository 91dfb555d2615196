// main() of the multi-rank gtest binary: every rank runs every test; rank 0 prints the usual
// report, the other ranks print only their own failures, each rank's exit code says whether
// it saw a failure (so mpirun fails when any rank does).
#include <fmt/format.h>

#include <cstdio>

#include "dist_test.h"

namespace braid::dist::testing {

void DistTest::TearDown() {
  // Rank r contributes 1 when it failed; the gathered flags name the failing ranks.
  Tensor mine = Tensor::from_vector(std::vector<int32_t>{HasFailure() ? 1 : 0}, {1});
  Tensor all = Tensor::zeros({size()}, DType::i32);
  try {
    world().all_gather(mine, all)->wait();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "could not agree on the test's outcome: " << e.what();
    return;
  }
  std::vector<int> failed;
  for (int r = 0; r < size(); ++r)
    if (all.data<int32_t>()[r] != 0) failed.push_back(r);
  if (!failed.empty() && !HasFailure())
    ADD_FAILURE() << "failed on rank(s) " << fmt::format("{}", fmt::join(failed, ", "));
}

double value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i32:
      return t.data<int32_t>()[i];
    case DType::i64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::u8:
      return t.data<uint8_t>()[i];
    default:
      return t.narrow(0, i, 1).item();
  }
}

uint16_t bits_at(const Tensor& t, int64_t i) {
  return static_cast<const uint16_t*>(t.data_ptr())[i];
}

namespace {

// Prints a non-zero rank's failed assertions with its rank, nothing else.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace braid::dist::testing

int main(int argc, char** argv) {
  int rank = 0;
  try {
    rank = braid::dist::init(&argc, &argv).world_rank();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid::dist::init failed: %s\n", e.what());
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new braid::dist::testing::RankFailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS();
  braid::dist::finalize();
  return failed;
}
