//! A file mapped shared, read and written only as aligned atomics.
//!
//! The hint channel's page (docs/runtime.md, "The hint channel") is written by
//! the MPI ranks (libvhpc_wait, C) and by the slicer: every access to it, in
//! both, is an atomic load, store, read-modify-write or a futex on an aligned
//! 32- or 64-bit word. This crate maps the file and hands out those words as
//! `&AtomicU32` / `&AtomicU64` borrowed from the mapping, so the rest of the
//! slicer stays free of unsafe code.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use rustix::mm::{MapFlags, ProtFlags};

/// A whole file mapped read-write and shared (MAP_SHARED), unmapped on drop.
#[derive(Debug)]
pub struct SharedFile {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, touched only through atomics
// (see `u32_at`), so it may be used from any thread.
#[allow(unsafe_code)]
unsafe impl Send for SharedFile {}
#[allow(unsafe_code)]
unsafe impl Sync for SharedFile {}

impl SharedFile {
    /// Maps `path` (which must exist and not be empty); an error names it.
    pub fn open(path: &Path) -> io::Result<Self> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(named)?;
        let len = usize::try_from(file.metadata().map_err(named)?.len())
            .map_err(|_| named(io::Error::from(io::ErrorKind::InvalidData)))?;
        if len == 0 {
            return Err(named(io::Error::new(
                io::ErrorKind::InvalidData,
                "empty file",
            )));
        }
        // SAFETY: a fresh mapping at an address the kernel chooses, of the file's
        // length; it aliases no Rust object. The file stays mapped after `file`
        // is closed.
        #[allow(unsafe_code)]
        let addr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &file,
                0,
            )
        }
        .map_err(|e| named(e.into()))?;
        let ptr = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| named(io::Error::from(io::ErrorKind::AddrNotAvailable)))?;
        Ok(Self { ptr, len })
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 32-bit word at byte `offset`. Panics if it is not 4-aligned or not
    /// inside the mapping (a layout bug, not an input error).
    pub fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset % 4 == 0 && offset + 4 <= self.len,
            "word at {offset} of {}",
            self.len
        );
        // SAFETY: in bounds and aligned (checked above; the mapping is page
        // aligned); AtomicU32 has u32's size and alignment; the borrow cannot
        // outlive the mapping; every other party (other processes included)
        // accesses this word atomically only.
        #[allow(unsafe_code)]
        unsafe {
            &*self.ptr.as_ptr().add(offset).cast::<AtomicU32>()
        }
    }

    /// The 64-bit word at byte `offset` (8-aligned), as [`Self::u32_at`].
    pub fn u64_at(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset % 8 == 0 && offset + 8 <= self.len,
            "word at {offset} of {}",
            self.len
        );
        // SAFETY: as in `u32_at`, for AtomicU64.
        #[allow(unsafe_code)]
        unsafe {
            &*self.ptr.as_ptr().add(offset).cast::<AtomicU64>()
        }
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`; no borrow of it outlives `self`.
        #[allow(unsafe_code)]
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_of_one_file_see_each_others_stores() {
        let dir = std::env::temp_dir().join(format!("vhpc-shmap-{}", std::process::id()));
        std::fs::write(&dir, vec![0u8; 4096]).unwrap();
        let a = SharedFile::open(&dir).unwrap();
        let b = SharedFile::open(&dir).unwrap();
        a.u32_at(8).store(7, Ordering::SeqCst);
        b.u64_at(16).store(1 << 40, Ordering::SeqCst);
        assert_eq!(b.u32_at(8).load(Ordering::SeqCst), 7);
        assert_eq!(a.u64_at(16).load(Ordering::SeqCst), 1 << 40);
        assert_eq!(std::fs::read(&dir).unwrap()[8], 7);
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_missing_or_empty_file_is_an_error_naming_it() {
        let err = SharedFile::open(Path::new("/nonexistent/vhpc-page")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/vhpc-page"));
    }

    #[test]
    #[should_panic(expected = "word at 4094")]
    fn a_word_outside_the_mapping_panics() {
        let path = std::env::temp_dir().join(format!("vhpc-shmap-p-{}", std::process::id()));
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        let a = SharedFile::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let _ = a.u32_at(4094);
    }
}
