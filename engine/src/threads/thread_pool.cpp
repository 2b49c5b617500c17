#include "threads/thread_pool.h"

#include <system_error>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace petrel::threads {

Status check_thread_count(const char* what, size_t count, size_t cap) {
  const size_t limit = cap < kMaxThreads ? cap : kMaxThreads;
  if (count >= 1 && count <= limit) return Status::ok();
  const std::string rule = limit == 1 && cap > 1 ? " must be 1 in this single-threaded build (WebAssembly without threads)"
                                                 : " must be in 1.." + std::to_string(limit);
  return Error{ErrorCode::kInvalidArgument, what + rule + ", got " + std::to_string(count)};
}
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

constexpr int kSpins = 20000;  // tens of microseconds of polling before sleeping
constexpr uint64_t kClosed = 0xffffffff;  // a task index no job reaches

uint32_t generation_of(uint64_t cursor) { return static_cast<uint32_t>(cursor >> 32); }

}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  try {
    workers_.reserve(threads);
    for (size_t t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
#if defined(__EMSCRIPTEN_PTHREADS__)
  } catch (const std::system_error&) {
    // A thread is a Web Worker from the pool the module loaded at start (a Worker cannot
    // start while this thread blocks): when other pools hold them all, this one runs with
    // the workers it got, the caller's thread alone at worst. Results do not depend on
    // the thread count.
#endif
  } catch (...) {  // a thread the system would not start: the ones started wait on members about to go
    stop_workers();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cursor_.fetch_add(uint64_t{1} << 32);  // wakes spinners
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work(uint32_t generation, size_t thread) {
  uint64_t cursor = cursor_.load(std::memory_order_acquire);
  while (generation_of(cursor) == generation) {
    const size_t task = static_cast<uint32_t>(cursor);
    if (task >= tasks_.load(std::memory_order_relaxed)) return;
    if (!cursor_.compare_exchange_weak(cursor, cursor + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    call_(ctx_, task, thread);
    done_tasks_.fetch_add(1, std::memory_order_release);
    cursor = cursor_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run_erased(size_t tasks, Call call, void* ctx) {
  // Close the previous generation first: a worker still holding one of its cursor
  // values must not claim a task of the job being set up (its CAS now fails);
  // without this it could run a task of the new job twice, or the old call.
  cursor_.store((uint64_t{++generation_} << 32) | kClosed, std::memory_order_release);
  tasks_.store(tasks, std::memory_order_relaxed);
  call_ = call;
  ctx_ = ctx;
  done_tasks_.store(0, std::memory_order_relaxed);
  ++generation_;
  {
    std::lock_guard<std::mutex> lock(mutex_);  // pairs with the sleepers' wait
    cursor_.store(uint64_t{generation_} << 32, std::memory_order_release);
  }
  wake_.notify_all();
  work(generation_, 0);
  while (done_tasks_.load(std::memory_order_acquire) < tasks) cpu_relax();
}

void ThreadPool::worker_loop(size_t thread) {
  uint32_t seen = 0;
  while (true) {
    auto published = [&] { return generation_of(cursor_.load(std::memory_order_acquire)) != seen; };
    for (int spins = 0; !published() && spins < kSpins; ++spins) cpu_relax();
    if (!published()) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || published(); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    seen = generation_of(cursor_.load(std::memory_order_acquire));
    work(seen, thread);
  }
}

}  // namespace petrel::threads
