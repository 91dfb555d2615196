// One piece of work on its own thread, whose exception reaches whoever waits for it.
#pragma once

#include <exception>
#include <functional>
#include <thread>

namespace braid {

class BackgroundTask {
 public:
  BackgroundTask() = default;
  // Joins a task still running; its error, if any, is dropped (nobody is left to wait).
  ~BackgroundTask() {
    if (thread_.joinable()) thread_.join();
  }
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Starts `work` on a new thread; a previous task must have been waited for.
  void start(std::function<void()> work) {
    wait();
    thread_ = std::thread([this, work = std::move(work)] {
      try {
        work();
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }

  bool running() const { return thread_.joinable(); }

  // Waits for the task; rethrows its exception once.
  void wait() {
    if (thread_.joinable()) thread_.join();
    if (error_) {
      std::exception_ptr error = error_;
      error_ = nullptr;
      std::rethrow_exception(error);
    }
  }

 private:
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace braid
