// braid-schedule: builds a pipeline schedule, validates it (deadlock-free, complete) and
// prints its bubble and peak activations; optionally writes the simulated Chrome trace.
//   braid-schedule --schedule 1f1b --stages 4 --micro-batches 8 [--chunks 2]
//                  [--backward-cost 2] [--trace out.json] [--list]
#include <cstdio>
#include <map>
#include <string>

#include "braid/core/command_line.h"
#include "braid/core/error.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/validate.h"

namespace {

const braid::Usage kUsage{
    .program = "braid-schedule",
    .synopsis =
        "[--schedule NAME] [--stages P] [--micro-batches M] [--chunks V]\n"
        "[--backward-cost R] [--trace OUT.json] [--list]",
    .summary =
        "Builds a pipeline schedule, checks it is complete and deadlock-free, and prints "
        "its bubble\nand peak activations per stage.",
    .flags = {{"--schedule", "NAME", "schedule to build (--list names them); default 1f1b"},
              {"--stages", "P", "pipeline stages; default 4"},
              {"--micro-batches", "M", "micro-batches per step; default 8"},
              {"--chunks", "V", "model chunks per stage (interleaved schedules); default 1"},
              {"--backward-cost", "R", "a backward's cost relative to a forward; default 2"},
              {"--trace", "OUT.json", "also write the simulated timeline as a Chrome trace"},
              {"--list", "", "print the schedule names and exit"}},
    .example =
        "braid-schedule --schedule interleaved_1f1b --stages 4 --micro-batches 8 "
        "--chunks 2 --trace bubble.json"};

}  // namespace

int main(int argc, char** argv) {
  namespace pl = braid::parallel::pipeline;
  try {
    const braid::CommandLine cl = braid::parse_command_line(kUsage, {argv + 1, argv + argc});
    if (cl.help) return braid::print_help(kUsage);
    if (cl.has("--list")) {
      for (const std::string& name : pl::schedule_names()) std::printf("%s\n", name.c_str());
      return 0;
    }
    std::map<std::string, std::string> flags = {{"schedule", "1f1b"},   {"stages", "4"},
                                                {"micro-batches", "8"}, {"chunks", "1"},
                                                {"backward-cost", "2"}, {"trace", ""}};
    for (const auto& [name, value] : cl.flags) flags[name.substr(2)] = value;
    const auto integer = [&](const std::string& name) {
      return static_cast<int>(braid::parse_integer("--" + name, flags[name]));
    };
    const pl::ScheduleShape shape{integer("stages"), integer("micro-batches"), integer("chunks")};
    const pl::Schedule schedule = pl::make_schedule(flags["schedule"], shape);
    // A chunk holds 1/chunks of a stage's blocks: costs are per chunk, so schedules with and
    // without interleaving compare on one time scale (one stage's forward = 1 unit).
    const double chunk = 1.0 / shape.chunks;
    const pl::ScheduleReport report = pl::validate(
        schedule,
        {chunk, chunk * braid::parse_number("--backward-cost", flags["backward-cost"]), 0.0});
    std::printf("%s: %d stages, %d micro-batches, %d chunks: deadlock-free\n",
                schedule.name.c_str(), shape.stages, shape.microbatches, shape.chunks);
    std::printf("bubble %.4f (analytic %.4f), makespan %.1f stage-forward units\n",
                report.bubble_fraction, report.analytic_bubble_fraction, report.makespan);
    std::printf("peak activations per stage:");
    for (int peak : report.peak_activations) std::printf(" %d", peak);
    std::printf("\n");
    if (!flags["trace"].empty()) {
      // One forward unit is drawn as one millisecond.
      pl::write_chrome_trace(flags["trace"], report.events, schedule.name, 1000.0);
      std::printf("wrote %s\n", flags["trace"].c_str());
    }
    return 0;
  } catch (const braid::UsageError& e) {
    return braid::print_usage_error(kUsage, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-schedule: error: %s\n", e.what());
    return 1;
  }
}
