//! Reading the files a spec is or names (the spec itself, a router's
//! `routes_file`, an IDS `rules_file`): regular files only, opened without
//! blocking and read up to a size limit. A FIFO would otherwise block the
//! open until some writer appears (for ever, usually), and a device such
//! as `/dev/zero` or a runaway file would be read until memory runs out.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Largest spec file [`crate::load`] reads: 16 MiB, a hundred times the
/// largest spec anyone has written, small enough to parse in well under a
/// second (`docs/spec-reference.md`).
pub const MAX_SPEC_BYTES: u64 = 16 << 20;

/// Largest data file a spec names (a router's `routes_file`, an IDS
/// `rules_file`): 256 MiB, several times a full Internet routing table or
/// a complete public Snort ruleset (`docs/spec-reference.md`).
pub const MAX_DATA_FILE_BYTES: u64 = 256 << 20;

fn kind(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// `n` bytes in words, in the largest binary unit that divides it.
fn size_words(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Reads the whole regular file at `path`, refusing anything else and
/// anything larger than `max_bytes`. The error says what is wrong (without
/// the path, which the caller puts in its own message), e.g. `it is a FIFO,
/// not a regular file` or `it is larger than 16 MiB`.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    // O_NONBLOCK makes opening a FIFO return at once; it changes nothing
    // for the regular files read below.
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    // fstat of the opened file, so nothing can swap the path in between.
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!(
            "it is {}, not a regular file",
            kind(meta.file_type())
        ));
    }
    let too_large = || format!("it is larger than {}", size_words(max_bytes));
    if meta.len() > max_bytes {
        return Err(too_large());
    }
    // The file may grow while it is read: take one byte more than allowed
    // to notice without reading the rest.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_regular_file`] of a text file: the error also covers text that
/// is not UTF-8.
pub fn read_text_file(path: &Path, max_bytes: u64) -> Result<String, String> {
    let bytes = read_regular_file(path, max_bytes)?;
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        format!("line {line} is not valid UTF-8")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_the_largest_exact_unit() {
        assert_eq!(size_words(MAX_SPEC_BYTES), "16 MiB");
        assert_eq!(size_words(MAX_DATA_FILE_BYTES), "256 MiB");
        assert_eq!(size_words(4096), "4 KiB");
        assert_eq!(size_words(1000), "1000 bytes");
    }

    #[test]
    fn a_regular_file_is_read_whole_up_to_the_limit() {
        let path = std::env::temp_dir().join(format!("sluice-file-rs-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular_file(&path, 10).unwrap(), b"0123456789");
        assert_eq!(
            read_regular_file(&path, 9).unwrap_err(),
            "it is larger than 9 bytes"
        );
        std::fs::write(&path, b"ok\n\xff\n").unwrap();
        assert_eq!(
            read_text_file(&path, 10).unwrap_err(),
            "line 2 is not valid UTF-8"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
