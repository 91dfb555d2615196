// Tests for the shared command-line parser and help layout of braid's binaries.
#include "braid/core/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace braid {
namespace {

const Usage kUsage{.program = "tool",
                   .synopsis = "--input FILE [--steps N] [--fresh] [NAME]",
                   .summary = "Does a thing.",
                   .arguments = {{"NAME", "", "what to call it"}},
                   .flags = {{"--input", "FILE", "where to read", true},
                             {"--steps", "N", "how many"},
                             {"--fresh", "", "start over"}},
                   .example = "tool --input a.txt",
                   .notes = "See the manual."};

// The message of the UsageError parsing `args` throws; a test failure when it throws nothing.
std::string usage_error(const std::vector<std::string>& args) {
  try {
    parse_command_line(kUsage, args);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError";
  return {};
}

TEST(CommandLine, ParsesFlagsInOrderAndPositionals) {
  const CommandLine cl = parse_command_line(
      kUsage, {"--input", "a.txt", "--steps=5", "--fresh", "--steps", "-3", "name"});
  EXPECT_FALSE(cl.help);
  EXPECT_EQ(cl.value("--input"), "a.txt");
  EXPECT_EQ(cl.value("--steps"), "-3");  // the last one given; a value may start with '-'
  EXPECT_TRUE(cl.has("--fresh"));
  EXPECT_EQ(cl.value_or("--nothing", "x"), "x");
  EXPECT_EQ(cl.arguments, (std::vector<std::string>{"name"}));
  ASSERT_EQ(cl.flags.size(), 4u);
  EXPECT_EQ(cl.flags[1], (std::pair<std::string, std::string>{"--steps", "5"}));
}

TEST(CommandLine, DoubleDashEndsTheFlags) {
  const CommandLine cl = parse_command_line(kUsage, {"--input", "a", "--", "--fresh"});
  EXPECT_FALSE(cl.has("--fresh"));
  EXPECT_EQ(cl.arguments, (std::vector<std::string>{"--fresh"}));
}

TEST(CommandLine, HelpWinsOverEveryMistake) {
  EXPECT_TRUE(parse_command_line(kUsage, {"--help"}).help);
  EXPECT_TRUE(parse_command_line(kUsage, {"--bogus", "-h"}).help);
  EXPECT_TRUE(parse_command_line(kUsage, {"a", "b", "c", "--help", "--steps"}).help);
  // As a flag's value it is only a value.
  const CommandLine cl = parse_command_line(kUsage, {"--input", "--help"});
  EXPECT_FALSE(cl.help);
  EXPECT_EQ(cl.value("--input"), "--help");
}

TEST(CommandLine, MistakesNameTheBadArgument) {
  EXPECT_EQ(usage_error({"--input", "a", "--bogus"}), "unknown argument '--bogus'");
  EXPECT_EQ(usage_error({"--input", "a", "--bogus=1"}), "unknown argument '--bogus=1'");
  EXPECT_EQ(usage_error({"--input", "a", "-x"}), "unknown argument '-x'");
  EXPECT_EQ(usage_error({"--input", "a", "--steps"}), "--steps needs a value (--steps N)");
  EXPECT_EQ(usage_error({"--input", "a", "--fresh=yes"}),
            "--fresh takes no value, got '--fresh=yes'");
  EXPECT_EQ(usage_error({"--input", "a", "one", "two"}),
            "unexpected argument 'two' (at most 1 expected)");
  EXPECT_EQ(usage_error({"--steps", "3"}), "missing --input FILE");
  // The first mistake is the one reported.
  EXPECT_EQ(usage_error({"--first", "--second"}), "unknown argument '--first'");
}

TEST(CommandLine, RequiredPositionals) {
  const Usage usage{.program = "p",
                    .arguments = {{"IN", "", "input", true}, {"OUT", "", "output"}}};
  EXPECT_EQ(parse_command_line(usage, {"a"}).arguments.size(), 1u);
  try {
    parse_command_line(usage, {});
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "missing IN");
  }
  const Usage none{.program = "p"};
  try {
    parse_command_line(none, {"stray"});
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unexpected argument 'stray'");
  }
}

TEST(CommandLine, HelpTextHasEverySection) {
  EXPECT_EQ(kUsage.text(),
            "usage: tool --input FILE [--steps N] [--fresh] [NAME]\n"
            "\n"
            "Does a thing.\n"
            "\n"
            "arguments:\n"
            "  NAME          what to call it\n"
            "\n"
            "flags:\n"
            "  --input FILE  where to read\n"
            "  --steps N     how many\n"
            "  --fresh       start over\n"
            "  -h, --help    print this help and exit\n"
            "\n"
            "example:\n"
            "  tool --input a.txt\n"
            "\n"
            "See the manual.\n");
}

TEST(CommandLine, LongSynopsisLinesContinueUnderTheFirst) {
  const Usage usage{.program = "p", .synopsis = "--a A\n--b B"};
  EXPECT_EQ(usage.text().substr(0, 30), "usage: p --a A\n         --b B\n");
}

TEST(CommandLine, NumbersAreCheckedWhole) {
  EXPECT_EQ(parse_integer("--steps", "12"), 12);
  EXPECT_EQ(parse_integer("--steps", "-3"), -3);
  EXPECT_DOUBLE_EQ(parse_number("--cost", "2.5"), 2.5);
  EXPECT_DOUBLE_EQ(parse_number("--cost", "1e-3"), 1e-3);
  for (const std::string bad : {"", "x", "12x", "1.5", " "}) {
    try {
      parse_integer("--steps", bad);
      ADD_FAILURE() << "'" << bad << "' was taken as a whole number";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "--steps expects a whole number, got '" + bad + "'");
    }
  }
  for (const std::string bad : {"", "two", "2.5x"}) {
    try {
      parse_number("--cost", bad);
      ADD_FAILURE() << "'" << bad << "' was taken as a number";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "--cost expects a number, got '" + bad + "'");
    }
  }
  EXPECT_THROW(parse_integer("--steps", "99999999999999999999"), UsageError);
}

}  // namespace
}  // namespace braid
