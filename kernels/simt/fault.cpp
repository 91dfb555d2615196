// Fault reports: fault() for the other parts of the emulator, and the formatting every report
// shares (thread lists, sites, code addresses symbolised through the sanitizer runtime).
#include "fault.h"

#include <dlfcn.h>

#include <cxxabi.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "block.h"

extern "C" {
// Weak: the sanitizer runtimes' symboliser (file:line from the debug information) when linked.
void __sanitizer_symbolize_pc(void* pc, const char* format, char* out, size_t out_size)
    __attribute__((weak));
// UBSan's description of the report being printed (when UBSan is linked).
void __ubsan_get_current_report_data(const char** kind, const char** message, const char** file,
                                     unsigned* line, unsigned* column, char** address)
    __attribute__((weak));
}

// UBSan calls this for every report (its own definition is an empty weak one): undefined
// behaviour inside an emulated thread becomes a fault of its kernel, raised at the thread's next
// access or scheduling point. Only recorded here: UBSan is in the middle of its report.
extern "C" void __ubsan_on_report() {
  braid::simt::Block* block = braid::simt::tls_block;
  braid::simt::SimThread* thread = braid::simt::tls_thread;
  if (block == nullptr || thread == nullptr || block->undefined_behaviour ||
      __ubsan_get_current_report_data == nullptr)
    return;
  const char *kind = "", *message = "", *file = "";
  unsigned line = 0, column = 0;
  char* address = nullptr;
  __ubsan_get_current_report_data(&kind, &message, &file, &line, &column, &address);
  block->undefined_behaviour = braid::simt::FaultRecord{
      "undefined behaviour",
      fmt::format("thread {}: {} ({}) at {}:{}", braid::simt::thread_name(*block, thread->linear),
                  message, kind, file, line),
      {}};
  block->undefined_behaviour_countdown = 4;
}

namespace braid::simt {
namespace {

std::string coordinates(const dim3& block, uint32_t linear) {
  return fmt::format("({}, {}, {})", linear % block.x, linear / block.x % block.y,
                     linear / (block.x * block.y));
}

// The frames of a symbolizer's answer that name a source line, innermost first, joined by " <- "
// (a built-in's line, then the kernel line it was inlined into).
std::string join_frames(const std::vector<std::string>& frames) {
  std::string out;
  for (const std::string& f : frames) {
    if (f.empty() || f.find("<null>") != std::string::npos || f.find("??") != std::string::npos ||
        f.ends_with(":0"))
      continue;
    if (!out.empty()) out += " <- ";
    out += f;
  }
  return out;
}

// The sanitizer runtime's in-process symbolizer (takes a return address; frames NUL-separated).
std::string sanitizer_frames(uintptr_t return_address) {
  if (__sanitizer_symbolize_pc == nullptr) return "";
  char buffer[2048] = {};
  __sanitizer_symbolize_pc(reinterpret_cast<void*>(return_address), "%s:%l", buffer,
                           sizeof buffer - 1);
  std::vector<std::string> frames;
  for (size_t at = 0; at < sizeof buffer && buffer[at] != '\0';) {
    frames.emplace_back(buffer + at);
    at += frames.back().size() + 1;
  }
  return join_frames(frames);
}

// addr2line on the module holding the address. The in-process symbolizer of GCC's sanitizers
// finds no line for some functions (template instances in COMDAT sections); addr2line does, in
// milliseconds, and faults are rare.
std::string addr2line_frames(uintptr_t return_address) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(return_address), &info) == 0 || info.dli_fname == nullptr)
    return "";
  const uintptr_t pc = return_address - 1;  // inside the call instruction
  const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  // Position-independent modules are looked up by offset, a fixed-address executable by address.
  const auto* header = reinterpret_cast<const unsigned char*>(info.dli_fbase);
  const bool position_independent = header != nullptr && header[16] == 3;  // e_type == ET_DYN
  std::string module = info.dli_fname;
  if (module.empty() || module.find('/') == std::string::npos) module = "/proc/self/exe";
  for (char c : module)
    if (c == '\'' || c == '\n') return "";
  const std::string command = fmt::format("addr2line -i -e '{}' {:#x} 2>/dev/null", module,
                                          position_independent ? pc - base : pc);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::vector<std::string> frames;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::string frame(line);
    while (!frame.empty() && (frame.back() == '\n' || frame.back() == '\r')) frame.pop_back();
    if (const size_t d = frame.find(" (discriminator"); d != std::string::npos) frame.resize(d);
    frames.push_back(frame);
  }
  pclose(pipe);
  return join_frames(frames);
}

// "file:line" of a code address (a return address into kernel code), with the lines it was
// inlined into; the function and offset when there is no line information.
std::string symbolize(uintptr_t return_address) {
  if (return_address == 0) return "an unknown site";
  std::string where = sanitizer_frames(return_address);
  if (where.empty()) where = addr2line_frames(return_address);
  if (!where.empty()) return where;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(return_address), &info) != 0 && info.dli_sname != nullptr) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
    std::free(demangled);
    return fmt::format("{}+{:#x}", name,
                       return_address - reinterpret_cast<uintptr_t>(info.dli_saddr));
  }
  return fmt::format("pc {:#x}", return_address);
}

}  // namespace

std::string thread_name(const Block& block, uint32_t linear) {
  return coordinates(block.launch->block, linear);
}

std::string thread_list(const Block& block, std::vector<uint32_t> linear) {
  std::sort(linear.begin(), linear.end());
  linear.erase(std::unique(linear.begin(), linear.end()), linear.end());
  if (linear.empty()) return "none";
  std::string out;
  size_t ranges = 0;
  for (size_t i = 0; i < linear.size();) {
    size_t j = i;
    while (j + 1 < linear.size() && linear[j + 1] == linear[j] + 1) ++j;
    if (ranges == 8) {
      out += fmt::format(", ... ({} in all)", linear.size());
      break;
    }
    if (ranges > 0) out += ", ";
    out += thread_name(block, linear[i]);
    if (j > i) out += ".." + thread_name(block, linear[j]);
    ++ranges;
    i = j + 1;
  }
  return out;
}

std::string site_name(const std::source_location& site) {
  return fmt::format("{}:{}", site.file_name(), site.line());
}

std::string fault_message(const LaunchState& launch, uint3 block_index, const FaultRecord& record) {
  std::string details = record.details;
  for (size_t i = 0; i < record.pcs.size(); ++i) {
    const std::string marker = "{pc" + std::to_string(i) + "}";
    const std::string where = symbolize(record.pcs[i]);
    for (size_t at = details.find(marker); at != std::string::npos;
         at = details.find(marker, at + where.size()))
      details.replace(at, marker.size(), where);
  }
  return fmt::format("simt: {} in kernel {}, block ({}, {}, {}): {}", record.kind,
                     launch.kernel_name, block_index.x, block_index.y, block_index.z, details);
}

void fault(const char* kind, const std::string& details) {
  SimThread* thread = tls_thread;
  if (thread == nullptr) throw KernelFault(std::string("simt: ") + kind + ": " + details);
  // Unwinds the emulated thread's own stack to its entry, which records the fault.
  throw FiberFault{
      FaultRecord{kind, "thread " + thread_name(*tls_block, thread->linear) + ": " + details, {}}};
}

}  // namespace braid::simt
