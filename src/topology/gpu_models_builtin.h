#pragma once

// The text of config/gpus.json as it was at build time (generated gpu_models_builtin.cc), read by
// GpuModelTable::Builtin().
//
// Thread-safety: a constant.

namespace linkfit::topology::internal {

extern const char kBuiltinGpuModels[];

}  // namespace linkfit::topology::internal
