"""Writes the small image files of tests/unit/test_image.cpp and, for each,
<file>.npy: what PIL (ONNX's reference ImageDecoder) gives for
Image.open(file).convert("RGB"), which Onyx must match exactly.

    python3 tests/data/images/make_images.py   # rewrites this folder's files

The files are committed (made with Pillow 13.0.0); rerun only to change
them: their bytes depend on PIL's encoders, the .npy files on its decoders."""
import io
import os

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
W, H = 16, 12


def picture():
    """A 16 x 12 RGB test card: gradients, a hard edge and a checkerboard,
    so that chroma subsampling, upsampling and the DCT all show."""
    y, x = np.mgrid[0:H, 0:W]
    r = (x * 255 // (W - 1)).astype(np.uint8)
    g = (y * 255 // (H - 1)).astype(np.uint8)
    b = np.where((x // 2 + y // 2) % 2 == 0, 230, 20).astype(np.uint8)
    b[:, W // 2:] = (x[:, W // 2:] * y[:, W // 2:] * 7 % 256).astype(np.uint8)
    return np.stack([r, g, b], axis=2)


def alpha():
    y, x = np.mgrid[0:H, 0:W]
    return ((x + y) * 255 // (W + H - 2)).astype(np.uint8)


def files():
    rgb = Image.fromarray(picture(), "RGB")
    gray = rgb.convert("L")
    rgba = Image.fromarray(np.dstack([picture(), alpha()]), "RGBA")
    opaque = Image.fromarray(np.dstack([picture(), np.full((H, W), 255, np.uint8)]), "RGBA")
    gray16 = Image.fromarray(np.arange(W * H, dtype=np.uint16).reshape(H, W) * 2)  # I;16, 0 to 382
    palette = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=7)
    return [
        ("rgb.jpg", rgb, "JPEG", {"quality": 80}),  # 4:2:0
        ("rgb444.jpg", rgb, "JPEG", {"quality": 90, "subsampling": 0}),
        ("gray.jpg", gray, "JPEG", {"quality": 80}),
        ("progressive.jpg", rgb, "JPEG", {"quality": 80, "progressive": True}),
        ("cmyk.jpg", rgb.convert("CMYK"), "JPEG", {"quality": 90}),  # Adobe marker, inverted
        ("rgb.tif", rgb, "TIFF", {}),
        ("deflate.tif", rgb, "TIFF", {"compression": "tiff_adobe_deflate"}),
        ("lzw_gray.tif", gray, "TIFF", {"compression": "tiff_lzw"}),
        ("palette.tif", palette, "TIFF", {}),
        ("opaque_rgba.tif", opaque, "TIFF", {}),
        # Orientation BOTLEFT and RIGHTTOP: PIL applies them (12 x 16 for RIGHTTOP)
        ("bottom_up.tif", rgb, "TIFF", {"tiffinfo": {274: 4}}),
        ("right_top.tif", rgb, "TIFF", {"compression": "tiff_adobe_deflate", "tiffinfo": {274: 6}}),
        ("lossy.webp", rgb, "WEBP", {"quality": 80}),
        ("lossless_rgba.webp", rgba, "WEBP", {"lossless": True}),
        ("rgb.jp2", rgb, "JPEG2000", {"irreversible": False}),
        ("gray.j2k", gray, "JPEG2000", {"no_jp2": True, "irreversible": True, "quality_mode": "rates",
                                         "quality_layers": [8]}),
        ("rgba.jp2", rgba, "JPEG2000", {}),
        ("gray16.j2k", gray16, "JPEG2000", {"no_jp2": True}),
    ]


def main():
    for name, img, fmt, opts in files():
        buf = io.BytesIO()
        img.save(buf, fmt, **opts)
        data = buf.getvalue()
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        ref = np.ascontiguousarray(np.array(Image.open(io.BytesIO(data)).convert("RGB")))
        assert ref.shape in ((H, W, 3), (W, H, 3)) and ref.dtype == np.uint8, (name, ref.shape, ref.dtype)
        np.save(os.path.join(HERE, name + ".npy"), ref)
        print(f"{name}: {len(data)} bytes, {Image.open(io.BytesIO(data)).mode}")


if __name__ == "__main__":
    main()
