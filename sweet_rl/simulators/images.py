"""Former home of the image helpers, now :mod:`sweet_rl.models.chat_images`.

The frontend environment builds the image parts and the in-process simulator decodes them,
so the helpers sit below both packages; this name stays for code that imported it here.
"""

from sweet_rl.models.chat_images import (PNG_DATA_PREFIX, decode_data_url, downscale_png,
                                         image_part, png_data_url, text_part)

__all__ = ["PNG_DATA_PREFIX", "decode_data_url", "downscale_png", "image_part", "png_data_url",
           "text_part"]
