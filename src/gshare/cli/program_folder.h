// ProgramFolder: the folder the running gshare binary lies in. What it ships beside itself is
// found there: the function program (gshare-function) and the CUDA allocator shim
// (libgshare-cuda-shim.so).
//
// Thread safety: any thread.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "gshare/common/status.h"

namespace gshare {

// IoError naming /proc/self/exe when the kernel does not say where this program is.
Result<std::filesystem::path> ProgramFolder();

// The program `name`: a path as given, or a bare name looked up on PATH as a shell would (a child
// started with execve does not search). NotFound when PATH has no such program.
Result<std::string> FindProgram(const std::string& name);

// This process's environment, by name (for a child that gets it, less what its starter sets).
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace gshare
