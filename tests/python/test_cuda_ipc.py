"""zshard._cuda_ipc without a GPU: the 64 bytes of a daemon's CUDA IPC
handle reach cudaIpcOpenMemHandle whole (a handle has zero bytes inside,
which a c_char array would cut off), and a handle of the wrong size is one
clear error."""

import ctypes
import unittest

import zshard
from zshard import _cuda_ipc


class CudaIpcHandleTest(unittest.TestCase):

    def test_every_byte_of_the_handle_is_passed(self):
        raw = bytes([0x11, 0x00, 0x22, 0x00, 0x00] + list(range(59)))
        handle = _cuda_ipc.handle_from_bytes(raw)
        self.assertEqual(ctypes.sizeof(handle), 64)
        self.assertEqual(bytes(handle), raw)

    def test_a_handle_of_the_wrong_size_is_refused(self):
        with self.assertRaisesRegex(zshard.ZshardError,
                                    "has 63 bytes, want 64"):
            _cuda_ipc.handle_from_bytes(bytes(63))


if __name__ == "__main__":
    unittest.main()
