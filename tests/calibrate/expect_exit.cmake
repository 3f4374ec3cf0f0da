# Runs a calibration binary and checks its exit code and output (ctest, label calibrate).
#   cmake -DPROGRAM=path -DARGS="a|b|c" -DEXPECT=code [-DSTDOUT_1=regex ... -DSTDOUT_3=regex]
#         [-DSTDERR=regex] [-DMEASURED=file] -P expect_exit.cmake
# ARGS are separated by "|". With MEASURED, a run that exits 0 (a machine with GPUs) passes when
# it wrote measurements JSON to that file: the no-GPU test then becomes a smoke test.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${PROGRAM}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(report "command: ${PROGRAM} ${args}\nexit code: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(DEFINED MEASURED AND rc STREQUAL "0")
  file(READ "${MEASURED}" json)
  string(JSON format ERROR_VARIABLE bad GET "${json}" format)
  if(bad OR NOT format STREQUAL "moesim-measurements/1")
    message(FATAL_ERROR "exit code 0 but ${MEASURED} is not measurements JSON (${bad})\n${report}")
  endif()
  message(STATUS "measured on a GPU machine: ${MEASURED}")
  return()
endif()
if(NOT rc STREQUAL "${EXPECT}")
  message(FATAL_ERROR "expected exit code ${EXPECT}\n${report}")
endif()
foreach(var STDOUT_1 STDOUT_2 STDOUT_3)
  if(DEFINED ${var} AND NOT out MATCHES "${${var}}")
    message(FATAL_ERROR "stdout does not match \"${${var}}\"\n${report}")
  endif()
endforeach()
if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
  message(FATAL_ERROR "stderr does not match \"${STDERR}\"\n${report}")
endif()
