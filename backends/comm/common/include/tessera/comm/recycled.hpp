// Recycled<T>: class-specific allocation that keeps the last freed block of T, one per thread, for
// the next T. A halo exchange creates and frees one Work object per call (two through a plugin:
// the host's handle and the plugin's own); malloc + free was a fifth of an empty batch_p2p's
// cost. The block is freed when its thread exits. Only exact-size allocations are recycled (T
// should be final).
#pragma once

#include <cstddef>
#include <new>

namespace tessera::comm {

template <class T>
class Recycled {
 public:
  static void* operator new(std::size_t n) {
    Spare& s = spare();
    if (n == sizeof(T) && s.block) {
      void* p = s.block;
      s.block = nullptr;
      return p;
    }
    return ::operator new(n);
  }
  static void operator delete(void* p, std::size_t n) noexcept {
    Spare& s = spare();
    if (n == sizeof(T) && !s.block) {
      s.block = p;
      return;
    }
    ::operator delete(p);
  }

 private:
  struct Spare {
    void* block = nullptr;
    ~Spare() { ::operator delete(block); }
  };
  static Spare& spare() noexcept {
    thread_local Spare s;
    return s;
  }
};

}  // namespace tessera::comm
