// The SIMT translator's rules on source text: launches, __shared__ declarations, includes, what
// it leaves alone (comments, strings, line numbers) and what it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "rewrite.h"

namespace braid::simt::translate {
namespace {

std::string rewrite(const std::string& source, IncludeRewriter includes = nullptr) {
  RewriteResult r = rewrite_source(source, includes);
  EXPECT_TRUE(r.errors.empty()) << (r.errors.empty() ? "" : r.errors.front());
  return r.text;
}

std::string first_error(const std::string& source) {
  RewriteResult r = rewrite_source(source, nullptr);
  return r.errors.empty() ? "" : r.errors.front();
}

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(SimtTranslate, Launches) {
  EXPECT_EQ(rewrite("k<<<g, b>>>(x, y);"), "::braid::simt::launch(k, \"k\", g, b)(x, y);");
  EXPECT_EQ(rewrite("binary_dense_kernel<Op><<<blocks, kThreadsPerBlock, 0, stream>>>(a, n);"),
            "::braid::simt::launch(binary_dense_kernel<Op>, \"binary_dense_kernel<Op>\", blocks, "
            "kThreadsPerBlock, 0, stream)(a, n);");
  EXPECT_EQ(rewrite("ns::k<A<1>, 2><<<f(a, b), dim3(c, d), s>>>();"),
            "::braid::simt::launch(ns::k<A<1>, 2>, \"ns::k<A<1>, 2>\", f(a, b), dim3(c, d), s)();");
  EXPECT_EQ(rewrite("::top<<<1, static_cast<unsigned>(n)>>>(p);"),
            "::braid::simt::launch(::top, \"::top\", 1, static_cast<unsigned>(n))(p);");
  // Multi-line launches keep their newlines where they were.
  const std::string multi = "k<<<static_cast<unsigned>(rows),\n    t, 0,\n    s>>>(a,\n b);\nnext;";
  const std::string out = rewrite(multi);
  EXPECT_EQ(lines(out), lines(multi));
  EXPECT_EQ(out,
            "::braid::simt::launch(k, \"k\", static_cast<unsigned>(rows),\n    t, 0,\n    s)(a,\n "
            "b);\nnext;");
}

TEST(SimtTranslate, LeavesShiftsCommentsStringsAndDirectivesAlone) {
  const std::string source =
      "int a = x << 2 >> 1; // k<<<1, 1>>>() __shared__\n"
      "/* __shared__ float s[4]; */ const char* t = \"k<<<1,1>>>()\";\n"
      "#define LAUNCH k<<<1, 1>>>()\n"
      "auto r = R\"x(__shared__ int q[1];)x\"; int n = 1'000'000;\n";
  EXPECT_EQ(rewrite(source), source);
}

TEST(SimtTranslate, StaticSharedArrays) {
  EXPECT_EQ(rewrite("{ __shared__ float partials[32]; }"),
            "{ static ::braid::simt::SharedSlot braid_simt_shared_slot_1_; auto& partials = "
            "::braid::simt::static_shared<float[32]>(braid_simt_shared_slot_1_, \"partials\", "
            "\"float[32]\"); }");
  EXPECT_EQ(rewrite("{ __shared__ T tile[kRows][kCols + 1]; }"),
            "{ static ::braid::simt::SharedSlot braid_simt_shared_slot_1_; auto& tile = "
            "::braid::simt::static_shared<T[kRows][kCols + 1]>(braid_simt_shared_slot_1_, "
            "\"tile\", \"T[kRows][kCols + 1]\"); }");
  // Qualifiers, alignment, a scalar, several declarators, a dependent template type.
  EXPECT_EQ(rewrite("{ static volatile __shared__ __align__(16) int flag; }"),
            "{ static ::braid::simt::SharedSlot braid_simt_shared_slot_1_; auto& flag = "
            "::braid::simt::static_shared<volatile int, 16>(braid_simt_shared_slot_1_, \"flag\", "
            "\"volatile int\"); }");
  EXPECT_EQ(rewrite("{ __shared__ alignas(8) float a[4], b[2]; }"),
            "{ static ::braid::simt::SharedSlot braid_simt_shared_slot_1_; auto& a = "
            "::braid::simt::static_shared<float[4], 8>(braid_simt_shared_slot_1_, \"a\", "
            "\"float[4]\"); static ::braid::simt::SharedSlot braid_simt_shared_slot_2_; auto& b = "
            "::braid::simt::static_shared<float[2], 8>(braid_simt_shared_slot_2_, \"b\", "
            "\"float[2]\"); }");
  EXPECT_EQ(rewrite("{ __shared__ typename Pair<T, U>::type s[N]; }"),
            "{ static ::braid::simt::SharedSlot braid_simt_shared_slot_1_; auto& s = "
            "::braid::simt::static_shared<typename Pair<T, U>::type[N]>(braid_simt_shared_slot_1_, "
            "\"s\", \"typename Pair<T, U>::type[N]\"); }");
  // A declaration over two lines stays on the first, its newline after it.
  const std::string two = "{ __shared__ float\n  s[8]; x = 1; }";
  EXPECT_EQ(lines(rewrite(two)), lines(two));
}

TEST(SimtTranslate, DynamicSharedArrays) {
  EXPECT_EQ(rewrite("{ extern __shared__ float smem[]; }"),
            "{ float* const smem = ::braid::simt::dynamic_shared<float>(\"smem\"); }");
  EXPECT_EQ(
      rewrite("{ extern __shared__ __align__(16) unsigned char raw[]; }"),
      "{ unsigned char* const raw = ::braid::simt::dynamic_shared<unsigned char>(\"raw\"); }");
}

TEST(SimtTranslate, RefusesWhatItCannotTranslate) {
  EXPECT_NE(first_error("__shared__ float global_tile[4];").find("namespace scope"),
            std::string::npos);
  EXPECT_NE(first_error("namespace a { __shared__ float t[4]; }").find("namespace scope"),
            std::string::npos);
  EXPECT_NE(first_error("{ __shared__ int x = 0; }").find("initializer"), std::string::npos);
  EXPECT_NE(first_error("{ extern __shared__ float s[8]; }").find("unsized"), std::string::npos);
  EXPECT_NE(first_error("f() {\n\n <<<1, 1>>>(); }").find("line 3"), std::string::npos);
  EXPECT_NE(first_error("{ k<<<1, 1>>>; }").find("<<<configuration>>>(arguments)"),
            std::string::npos);
}

TEST(SimtTranslate, IncludesGoThroughTheResolver) {
  const IncludeRewriter resolver = [](const IncludeRef& ref) -> std::optional<std::string> {
    if (ref.path == "device_reduce.cuh") return "#include \"/gen/device_reduce.cuh\"";
    return std::nullopt;
  };
  EXPECT_EQ(rewrite("#include \"device_reduce.cuh\"\n#include <cmath>\nint x;", resolver),
            "#include \"/gen/device_reduce.cuh\"\n#include <cmath>\nint x;");
  EXPECT_TRUE(has_cuda_syntax("void f() { __shared__ int a[1]; }"));
  EXPECT_TRUE(has_cuda_syntax("void f() { k<<<1, 1>>>(); }"));
  EXPECT_FALSE(has_cuda_syntax("int a = b << 1; // __shared__ k<<<1, 1>>>"));
  const std::vector<IncludeRef> refs = includes_of("#include <a.h>\n  #  include \"b/c.cuh\"\n");
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_TRUE(refs[0].angled);
  EXPECT_EQ(refs[1].path, "b/c.cuh");
}

}  // namespace
}  // namespace braid::simt::translate
