# Writes OUT, a C++ source defining gshare::kChunkDigestPtx as the text of the PTX file PTX.
#   cmake -DPTX=kernel.ptx -DOUT=kernel_ptx.cc -P embed_ptx.cmake
file(READ "${PTX}" ptx)
get_filename_component(ptx_name "${PTX}" NAME)
if(ptx MATCHES "\\)gshare_ptx\"")
  message(FATAL_ERROR "${PTX} contains the raw string's delimiter")
endif()
file(WRITE "${OUT}.tmp"
     "// Generated from ${ptx_name} by embed_ptx.cmake; do not edit.\n"
     "#include \"gshare/device/cuda/chunk_digest_ptx.h\"\n\n"
     "namespace gshare {\n\n"
     "extern const char kChunkDigestPtx[] = R\"gshare_ptx(${ptx})gshare_ptx\";\n\n"
     "}  // namespace gshare\n")
file(RENAME "${OUT}.tmp" "${OUT}")
