//! The one box's database on a disk of the run's own: a tmpfs ([`SIZE`]) the nemesis
//! fills to the last byte, then frees (`FaultKind::DiskFull`). A full disk once lost
//! acknowledged orders (2026-11-30: a commit that failed there left its connection
//! counting a transaction SQLite had ended, `server::database`). Mounting needs root,
//! as the chaos run has where `npm test` runs; where it cannot mount, the database is
//! in the run's folder and the fault is not drawn.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

/// The disk's size: the one box's database and its log take a few MB in a run.
const SIZE: &str = "32m";

/// A tmpfs mounted for the run.
pub struct Disk {
    path: PathBuf,
}

/// The file that fills the disk; the disk has room again once it is dropped.
pub struct Filler(PathBuf);

impl Disk {
    /// A tmpfs mounted at `path` (made if missing).
    pub fn mount(path: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={SIZE}"), "tmpfs"])
            .arg(path)
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("mount: {e}"))?;
        if !status.success() {
            return Err(format!("mounting a tmpfs at {} needs root", path.display()));
        }
        Ok(Self { path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills the disk with a file of zeros, to its last byte.
    pub fn fill(&self) -> Result<Filler, String> {
        let path = self.path.join("filler");
        let mut file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        // What a whole chunk could not take.
        for _ in 0..chunk.len() {
            if file.write_all(&[0]).is_err() {
                break;
            }
        }
        Ok(Filler(path))
    }

    /// Copies what is on the disk to `keep` (the run's folder), for a look after the
    /// run.
    pub fn keep_files(&self, keep: &Path) {
        if let Ok(files) = std::fs::read_dir(&self.path) {
            for file in files.flatten().filter(|f| f.file_name() != "filler") {
                let _ = std::fs::copy(file.path(), keep.join(file.file_name()));
            }
        }
    }

    /// Unmounts it (once more: quietly nothing).
    pub fn unmount(&self) {
        let mut umount = std::process::Command::new("umount");
        let _ = umount.arg("-l").arg(&self.path).stderr(std::process::Stdio::null()).status();
    }
}

/// Unmounted however the run ends.
impl Drop for Disk {
    fn drop(&mut self) {
        self.unmount();
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
