#include "cli/npy.h"

#include <fstream>

#include "core/error.h"

namespace tandem {

void write_npy(const std::filesystem::path& path, const Tensor& t) {
  TANDEM_CHECK(t.dtype == DType::F32 && t.device == Device::CPU, "write_npy needs host f32");
  std::string shape = "(";
  for (int i = 0; i < t.ndim(); i++) shape += std::to_string(t.dim(i)) + (t.ndim() == 1 || i + 1 < t.ndim() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // magic (6) + version (2) + header length (2) + header, padded to 64 bytes with '\n' last.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot open for writing", path.string());
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(static_cast<const char*>(t.data), std::streamsize(t.nbytes()));
  if (!out) fail("{}: write failed", path.string());
}

}  // namespace tandem
