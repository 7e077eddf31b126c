// Public runtime API: Session, Executable, CompileOptions.
#pragma once

#include "fusebox/graph.h"
#include "runtime/session.h"
