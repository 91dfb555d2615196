// braid-schedule: builds a pipeline schedule, validates it (deadlock-free, complete) and
// prints its bubble and peak activations; optionally writes the simulated Chrome trace.
//   braid-schedule --schedule 1f1b --stages 4 --micro-batches 8 [--chunks 2]
//                  [--backward-cost 2] [--trace out.json] [--list]
#include <cstdio>
#include <map>
#include <string>

#include "braid/core/error.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/validate.h"

int main(int argc, char** argv) {
  namespace pl = braid::parallel::pipeline;
  try {
    std::map<std::string, std::string> flags = {{"schedule", "1f1b"},   {"stages", "4"},
                                                {"micro-batches", "8"}, {"chunks", "1"},
                                                {"backward-cost", "2"}, {"trace", ""}};
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--list") {
        for (const std::string& name : pl::schedule_names()) std::printf("%s\n", name.c_str());
        return 0;
      }
      BRAID_CHECK(arg.rfind("--", 0) == 0 && flags.count(arg.substr(2)) && i + 1 < argc,
                  "unknown or incomplete argument '{}' (flags: --schedule --stages "
                  "--micro-batches --chunks --backward-cost --trace --list)",
                  arg);
      flags[arg.substr(2)] = argv[++i];
    }
    const pl::ScheduleShape shape{std::stoi(flags["stages"]), std::stoi(flags["micro-batches"]),
                                  std::stoi(flags["chunks"])};
    const pl::Schedule schedule = pl::make_schedule(flags["schedule"], shape);
    // A chunk holds 1/chunks of a stage's blocks: costs are per chunk, so schedules with and
    // without interleaving compare on one time scale (one stage's forward = 1 unit).
    const double chunk = 1.0 / shape.chunks;
    const pl::ScheduleReport report =
        pl::validate(schedule, {chunk, chunk * std::stod(flags["backward-cost"]), 0.0});
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-schedule: error: %s\n", e.what());
    return 1;
  }
}
