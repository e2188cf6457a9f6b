# Writes OUT, a C++ source defining gshare::kChunkDigestImage as the bytes of the file IMAGE (the
# chunk digest kernel's fat binary).
#   cmake -DIMAGE=chunk_digest_kernel.fatbin -DOUT=chunk_digest_image.cc -P embed_image.cmake
file(READ "${IMAGE}" hex HEX)
get_filename_component(image_name "${IMAGE}" NAME)
string(LENGTH "${hex}" digits)
if(digits EQUAL 0)
  message(FATAL_ERROR "${IMAGE} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp"
     "// Generated from ${image_name} by embed_image.cmake; do not edit.\n"
     "#include \"gshare/device/cuda/chunk_digest_image.h\"\n\n"
     "namespace gshare {\n\n"
     "alignas(16) extern const unsigned char kChunkDigestImage[] = {\n    ${bytes}};\n"
     "extern const std::size_t kChunkDigestImageBytes = sizeof(kChunkDigestImage);\n\n"
     "}  // namespace gshare\n")
file(RENAME "${OUT}.tmp" "${OUT}")
