// Loading the CUDA libraries at run time (dlopen), so that every fusebox binary starts, and passes
// every CPU test, on a machine without an NVIDIA driver. A library that is missing is an error
// naming it and every place that was searched.
//
// Search order for each library (first hit wins):
//   1. the folders of $FUSEBOX_CUDA_LIBRARY_PATH (colon-separated), in order;
//   2. the dynamic linker's own search (LD_LIBRARY_PATH, the ld.so cache);
//   3. the toolkit's folders: $CUDA_HOME/lib64, /usr/local/cuda/lib64,
//      /usr/local/cuda/targets/x86_64-linux/lib;
//   4. for cuDNN also the wheels PyTorch installs (site-packages/nvidia/cudnn/lib under the
//      Python installations of /usr, /usr/local and /opt).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "fusebox/status.h"

namespace fusebox::cuda {

struct LibrarySpec {
  const char* what;                    // "the CUDA driver", for messages
  std::vector<const char*> sonames;    // tried in order in every folder
  bool python_wheels = false;          // also search site-packages/nvidia/<wheel>/lib
  const char* wheel = nullptr;         // "cudnn"
};

// A dlopen handle (never closed: the library stays loaded for the process), or an error
// "cannot load the CUDA driver (libcuda.so.1): searched ...; last error: ...".
Expected<void*> open_library(const LibrarySpec& spec);

// The address of `symbol` in `handle`, or an error naming the library and the symbol.
Expected<void*> find_symbol(void* handle, const char* what, const char* symbol);

}  // namespace fusebox::cuda
