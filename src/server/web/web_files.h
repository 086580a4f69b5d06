// The web pages' files (this folder's *.html, *.js, *.css), compiled into the binary by
// cmake/embed_files.cmake: a served binary needs no files beside it.
#pragma once

#include <span>
#include <string_view>

namespace tandem::server {

struct EmbeddedFile {
  std::string_view name;   // the file's base name, e.g. "chat.js"
  std::string_view bytes;  // its contents, exactly
};

// Every embedded file, sorted by name. Defined in the generated web_files.cpp.
std::span<const EmbeddedFile> embedded_web_files();

}  // namespace tandem::server
