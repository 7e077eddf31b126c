// Public graph API: the IR types and the builder.
//
//   fusebox::GraphBuilder b("mlp");
//   auto x = b.input("x", fusebox::DType::F32, {fusebox::Dim::symbol("N"), 512});
//   auto w = b.input("w", fusebox::DType::F32, {512, 256});
//   b.output(b.gelu(b.matmul(x, w), /*tanh_approx=*/true));
//   fusebox::Expected<fusebox::Graph> g = b.build();
#pragma once

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
