// libjpeg structs with tessera's error handling (jpeg_codec.hpp).
#include "jpeg_codec.hpp"

#include <cstdlib>
#include <utility>

namespace tessera::data::internal {

JpegGuard::JpegGuard(std::string what, std::string fix)
    : what_(std::move(what)), fix_(std::move(fix)) {
  jpeg_std_error(&err_.mgr);
  err_.mgr.error_exit = on_error;
  err_.mgr.emit_message = on_message;
}

void JpegGuard::on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<Error*>(cinfo->err);
  err->mgr.format_message(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Trace messages (level >= 0) are dropped: library code never prints.
void JpegGuard::on_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_error(cinfo);
}

void JpegGuard::fail() const {
  throw InvalidArgument(detail::cat(what_, ": ", err_.message, fix_));
}

Decompressor::Decompressor(const std::string& name)
    : guard_(detail::cat("'", name, "' is not a readable JPEG"), "; re-encode or remove the file") {
  cinfo.err = guard_.manager();
  run([this] { jpeg_create_decompress(&cinfo); });
  created_ = true;
}

Decompressor::~Decompressor() {
  if (created_) jpeg_destroy_decompress(&cinfo);
}

Compressor::Compressor(const std::string& name)
    : guard_(detail::cat("writing the JPEG '", name, "' failed"), "") {
  cinfo.err = guard_.manager();
  run([this] { jpeg_create_compress(&cinfo); });
  created_ = true;
}

Compressor::~Compressor() {
  if (created_) jpeg_destroy_compress(&cinfo);
  std::free(buffer);  // jpeg_mem_dest's buffer (malloc'd by libjpeg)
}

}  // namespace tessera::data::internal
