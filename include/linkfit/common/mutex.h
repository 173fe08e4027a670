#pragma once

// linkfit::Mutex, its scoped lock and condition variable, and the annotations that let clang's
// -Wthread-safety check the locking contract every header states: a member marked
// LINKFIT_GUARDED_BY(mutex_) read or written without mutex_ held, or a method marked
// LINKFIT_REQUIRES(mutex_) called without it, does not compile under clang (the fuzz preset is
// the clang build CI runs; GCC ignores the annotations).
//
//   mutable Mutex mutex_;
//   int count_ LINKFIT_GUARDED_BY(mutex_) = 0;
//   void BumpLocked() LINKFIT_REQUIRES(mutex_);
//   ...
//   MutexLock lock(mutex_);
//   while (count_ == 0) wake_.Wait(mutex_);   // no predicate lambdas: the loop is checked
//
// Thread-safety: Mutex, MutexLock and CondVar are what their names say; a MutexLock belongs to
// the thread that made it.

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define LINKFIT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define LINKFIT_THREAD_ANNOTATION(x)
#endif

#define LINKFIT_CAPABILITY(name) LINKFIT_THREAD_ANNOTATION(capability(name))
#define LINKFIT_SCOPED_CAPABILITY LINKFIT_THREAD_ANNOTATION(scoped_lockable)
#define LINKFIT_GUARDED_BY(mutex) LINKFIT_THREAD_ANNOTATION(guarded_by(mutex))
#define LINKFIT_PT_GUARDED_BY(mutex) LINKFIT_THREAD_ANNOTATION(pt_guarded_by(mutex))
#define LINKFIT_REQUIRES(...) LINKFIT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define LINKFIT_EXCLUDES(...) LINKFIT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define LINKFIT_ACQUIRE(...) LINKFIT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define LINKFIT_RELEASE(...) LINKFIT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define LINKFIT_NO_THREAD_SAFETY_ANALYSIS LINKFIT_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace linkfit {

class LINKFIT_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() LINKFIT_ACQUIRE() { mutex_.lock(); }
  void Unlock() LINKFIT_RELEASE() { mutex_.unlock(); }

  // BasicLockable, for CondVar's std::condition_variable_any.
  void lock() LINKFIT_ACQUIRE() { mutex_.lock(); }
  void unlock() LINKFIT_RELEASE() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

// Holds a Mutex for its scope; Unlock/Lock let a loop step outside it (an API call) and back.
class LINKFIT_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) LINKFIT_ACQUIRE(mutex) : mutex_(mutex) { mutex_.Lock(); }
  ~MutexLock() LINKFIT_RELEASE() {
    if (held_) mutex_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() LINKFIT_RELEASE() {
    mutex_.Unlock();
    held_ = false;
  }
  void Lock() LINKFIT_ACQUIRE() {
    mutex_.Lock();
    held_ = true;
  }

 private:
  Mutex& mutex_;
  bool held_ = true;
};

// A condition variable waited on with a Mutex held (it is released while waiting). Wakes may be
// spurious: wait in a loop on the condition.
class CondVar {
 public:
  void Wait(Mutex& mutex) LINKFIT_REQUIRES(mutex) { cv_.wait(mutex); }
  // False when `deadline` passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex& mutex, const std::chrono::time_point<Clock, Duration>& deadline)
      LINKFIT_REQUIRES(mutex) {
    return cv_.wait_until(mutex, deadline) == std::cv_status::no_timeout;
  }
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mutex, const std::chrono::duration<Rep, Period>& timeout)
      LINKFIT_REQUIRES(mutex) {
    return cv_.wait_for(mutex, timeout) == std::cv_status::no_timeout;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace linkfit
