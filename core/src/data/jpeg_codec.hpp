// Internal to the JPEG code (image_jpeg.cpp decodes, jpeg_restarts.cpp rewrites): libjpeg structs
// with tessera's error handling.
//
// libjpeg reports errors by calling error_exit, which must not return: it longjmps back to the
// setjmp in JpegGuard::run(). Nothing that owns memory may live in the frames a longjmp skips, so
// every buffer is allocated before a guarded step and the steps hold plain pointers only.
#pragma once

// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <csetjmp>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::data::internal {

/// An error manager whose errors, and warnings too (libjpeg's warnings are corrupt data or a
/// premature end, which it fills with grey and carries on), end the guarded step.
class JpegGuard {
 public:
  /// A failed step throws InvalidArgument "<what>: <libjpeg's message><fix>".
  JpegGuard(std::string what, std::string fix);
  JpegGuard(const JpegGuard&) = delete;
  JpegGuard& operator=(const JpegGuard&) = delete;

  jpeg_error_mgr* manager() { return &err_.mgr; }

  /// Runs `step` (libjpeg calls on plain pointers); a libjpeg error or warning throws.
  template <class Step>
  void run(Step&& step) {
    if (!guarded(step)) fail();
  }

 private:
  struct Error {
    jpeg_error_mgr mgr;  // first member: libjpeg hands back &mgr as cinfo->err
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
  };
  [[noreturn]] static void on_error(j_common_ptr cinfo);
  static void on_message(j_common_ptr cinfo, int level);
  [[noreturn]] void fail() const;

  template <class Step>
  bool guarded(Step& step) {
    if (setjmp(err_.jump) != 0) return false;
    step();
    return true;
  }

  std::string what_, fix_;
  Error err_{};
};

/// Owns one jpeg_decompress_struct; failures name `name` as not a readable JPEG.
class Decompressor {
 public:
  explicit Decompressor(const std::string& name);
  ~Decompressor();
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  template <class Step>
  void run(Step&& step) {
    guard_.run(step);
  }

  jpeg_decompress_struct cinfo{};

 private:
  JpegGuard guard_;
  bool created_ = false;
};

/// Owns one jpeg_compress_struct writing to memory (`buffer`, `size`: jpeg_mem_dest's, freed
/// here); failures name `name` as not written.
class Compressor {
 public:
  explicit Compressor(const std::string& name);
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  template <class Step>
  void run(Step&& step) {
    guard_.run(step);
  }

  jpeg_compress_struct cinfo{};
  unsigned char* buffer = nullptr;
  unsigned long size = 0;

 private:
  JpegGuard guard_;
  bool created_ = false;
};

}  // namespace tessera::data::internal
