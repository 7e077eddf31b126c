// The generated ONNX protobuf classes (Debian's libonnx-dev installs the ONNX-ML variant, which
// is a superset of the plain one; the build defines ONNX_ML accordingly).
#pragma once

#include <onnx/onnx_pb.h>
