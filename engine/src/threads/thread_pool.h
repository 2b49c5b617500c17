// The intra-op thread pool: one per Translator, sized by the caller. The calling
// thread works too; workers spin briefly before sleeping because a decoder step
// makes ~100 parallel calls of tens of microseconds each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "petrel/status.h"

namespace petrel::threads {

// Threads a process may run Petrel on. A WebAssembly build without emscripten's
// pthreads (the default: pthreads need SharedArrayBuffer, so a page served with
// cross-origin isolation) runs everything on the caller's thread.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
inline constexpr size_t kMaxThreads = 1;
#else
inline constexpr size_t kMaxThreads = SIZE_MAX;
#endif
// A count of threads (`what`: "threads", "workers") in 1..min(cap, kMaxThreads), or an
// error saying so (and why, where this build runs one thread).
Status check_thread_count(const char* what, size_t count, size_t cap);

class ThreadPool {
 public:
  // Starts threads - 1 workers; throws std::system_error when the system will not
  // start one (after stopping those it did).
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Calls fn(task, thread) for every task in [0, tasks), `thread` in [0, size()),
  // spread over the threads; returns when all are done. Not reentrant.
  template <class Fn>
  void run(size_t tasks, Fn&& fn) {
    if (tasks == 0) return;
    if (workers_.empty() || tasks == 1) {
      for (size_t t = 0; t < tasks; ++t) fn(t, size_t{0});
      return;
    }
    run_erased(tasks, [](void* ctx, size_t task, size_t thread) { (*static_cast<Fn*>(ctx))(task, thread); }, &fn);
  }

 private:
  using Call = void (*)(void* ctx, size_t task, size_t thread);
  void run_erased(size_t tasks, Call call, void* ctx);
  // Claims and runs tasks of run `generation` until none are left.
  void work(uint32_t generation, size_t thread);
  void worker_loop(size_t thread);
  void stop_workers();  // wakes every worker to return, and joins it

  // (generation << 32) | next task: a task is claimed by CAS, so a worker that
  // wakes late can never take a task of a later run for one of an earlier run.
  std::atomic<uint64_t> cursor_{0};
  std::atomic<size_t> done_tasks_{0};
  // Written before the cursor publishes a run; stable while any of its tasks runs.
  std::atomic<size_t> tasks_{0};
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  uint32_t generation_ = 0;  // the caller's count of runs

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
};

}  // namespace petrel::threads
