"""`torch_xla.test.test_utils`: the progress lines and summary-writer helpers training scripts call."""

from xlanb.compat.training import (close_summary_writer, get_summary_writer, now, print_test_update,
                                   print_training_update, write_to_summary)
