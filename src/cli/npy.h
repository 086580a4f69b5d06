// Writes a standard NumPy .npy file (format 1.0, little-endian f32, C order).
#pragma once

#include <filesystem>

#include "core/tensor.h"

namespace tandem {

void write_npy(const std::filesystem::path& path, const Tensor& host_f32);

}  // namespace tandem
