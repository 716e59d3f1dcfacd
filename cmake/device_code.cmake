# The kernels: collectives/device/kernels.cu is compiled into one fatbin (sm_90 code, plus compute_90 PTX that
# newer GPUs JIT-compile), which tools/embed_bin turns into a C array linked into the library. The library loads
# it with cuModuleLoadData when a communicator gets a device: no runtime library, no file beside the .so.
set(DCCL_FATBIN ${PROJECT_BINARY_DIR}/dccl_kernels.fatbin)
set(DCCL_FATBIN_C ${PROJECT_BINARY_DIR}/dccl_kernels_fatbin.c)
# Every header the kernels may include (dev_work.h, the launch's layout, among them): a change rebuilds them.
file(GLOB DCCL_DEVICE_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/collectives/device/*.cuh
     ${PROJECT_SOURCE_DIR}/collectives/device/*.h ${PROJECT_SOURCE_DIR}/pure/*.h)
set(DCCL_NVCC_WERROR "")
# Diagnostics: kernels that time their stages and print the means (collectives/device/dev_stages.cuh).
option(DCCL_DEV_STAGES "Kernels time a launch's stages and print their means (diagnostics; slower)" OFF)
set(DCCL_NVCC_STAGES "")
if(DCCL_DEV_STAGES)
  set(DCCL_NVCC_STAGES -DDCCL_DEV_STAGES)
endif()
if(DCCL_WERROR)
  set(DCCL_NVCC_WERROR --Werror=all-warnings)
endif()
# -fmad=false: a premultiply and the sum after it stay two roundings, as on the host (a fused multiply-add would
# give other bits than the host paths and the same call elsewhere; the kernels are bound by memory, not FLOPs).
add_custom_command(
  OUTPUT ${DCCL_FATBIN}
  COMMAND ${CMAKE_CUDA_COMPILER} -fatbin -O3 -std=c++17 -fmad=false ${DCCL_NVCC_WERROR} ${DCCL_NVCC_STAGES}
          -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90
          -I${PROJECT_SOURCE_DIR} -I${PROJECT_SOURCE_DIR}/include
          ${PROJECT_SOURCE_DIR}/collectives/device/kernels.cu -o ${DCCL_FATBIN}
  DEPENDS ${PROJECT_SOURCE_DIR}/collectives/device/kernels.cu ${DCCL_DEVICE_HEADERS}
  COMMENT "Compiling the DCCL kernels (sm_90 + compute_90 PTX)" VERBATIM)
add_executable(embed_bin ${PROJECT_SOURCE_DIR}/tools/embed_bin.c)
add_custom_command(OUTPUT ${DCCL_FATBIN_C}
                   COMMAND embed_bin ${DCCL_FATBIN} ${DCCL_FATBIN_C} dccl_kernels_fatbin
                   DEPENDS embed_bin ${DCCL_FATBIN} VERBATIM)
target_sources(dccl_objs PRIVATE ${DCCL_FATBIN_C})
target_include_directories(dccl_objs PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
target_compile_definitions(dccl_objs PUBLIC DCCL_HAVE_DEVICE_CODE)
