//! What the integration tests (`src/tests/`) and the load tool (`src/bin/bench/`) use
//! below the public API (`client`, `config`, `error`, `server`), in one place: the
//! stores, scripts and Redis layout they check the invariants against, and the steps
//! the fault drills run by hand. Everything else in the domains is the crate's own.

pub use crate::{
    auth::{
        challenge::{Challenge, Solution},
        names::{self, Keys},
        password::{decoy_cost, Cost, Hasher},
    },
    backend::{
        db_clock,
        layout::{
            bucket_of, last_sale, order_id_counter, sale_changes, sign_ups_in_minute, SaleKeys, Scripts, ATTEMPTS_KEPT,
            DRAIN_GRACE_MS, GROUP, ORDER_IDS_KEPT, REBUILD_DEADLINE, SIGN_INS_KEPT, SIGN_UPS_FROM_ADDRESS_KEPT,
            SIGN_UPS_IN_MINUTE_KEPT, SIGN_UP_CHALLENGE_KEPT, WORKER_LEASE,
        },
        layout_version::LAYOUT_VERSION,
        Backend, Db, RedisConn, Replicas,
    },
    order_ids::{compose, decompose, OrderIds, SPARE_BASE},
    orders::{
        entry::{Entry, OrderMsg},
        give_back::give_back,
        lifecycle,
        settle::settle,
        snapshot::RebuildSource,
        store::{self, Fate},
        sweeper::sweep,
        CancelReason,
    },
    report::{tally::Tally, Outcome, MOST_REPORT_ENTRIES},
    sale::{
        batches::{mailbox, Batches, CALLS_PER_SALE, MOST_PER_CALL},
        gate::{self, Ask, Bucket, Verdict},
        grab::SHED_MESSAGE,
        refill, stock, warm, REDIS_DEADLINE,
    },
    server::idempotency::{pending_mark, SHOPPER_PENDING},
    voucher::{
        ledger::{self, StockChange},
        store::{self as vouchers, VoucherRow},
        MOST_STOCK_CHANGES,
    },
    worker::{Saver, WorkerSettings, NAME_LEASE},
};

/// libfaketime, which offsets one process's clock (Debian's `faketime` package, which
/// `.ci/setup` installs with `SECKILL_NEED_FAKETIME=1`): the chaos run's clock faults,
/// and the drills of a process whose clock is off.
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Failed password checks an address may make, at any names, before it is held back.
pub const FAILURES_PER_ADDRESS: u32 = crate::auth::attempts::PER_ADDRESS;
/// Guesses at the admin token an address may make before it is held back.
pub const GUESSES_PER_ADDRESS: u32 = crate::auth::attempts::PER_ACCOUNT_FROM_ADDRESS;
/// Failures at one account from every address before it slows those that fail.
pub const GUESSES_PER_ACCOUNT: u32 = crate::auth::attempts::PER_ACCOUNT;
/// Right passwords at one account in an hour past which its checks share half the
/// hash pool.
pub const SIGN_INS_OFTEN: u32 = crate::auth::attempts::OFTEN;
/// The live feed's path.
pub const FEED_PATH: &str = crate::live::FEED_PATH;
/// The CSV exports' paths.
pub const CSV_PATHS: [&str; 2] = [crate::orders::export::PATH, crate::report::api::CSV_PATH];

/// A disk of a drill's own: a tmpfs it can fill to the last byte and free again (the
/// full-disk drill of `src/tests/faults.rs` and the chaos run's `DiskFull` fault, on
/// the one box's database). Mounting needs root, as `npm test` runs where it is made
/// for; elsewhere [`disk::Disk::mount`] says why it cannot.
pub mod disk {
    use std::{
        io::Write,
        path::{Path, PathBuf},
        process::{Command, Stdio},
    };

    /// A tmpfs mounted at a path, unmounted when dropped.
    pub struct Disk {
        path: PathBuf,
    }

    /// The file that fills a [`Disk`]; the disk has room again once it is dropped.
    pub struct Filler(PathBuf);

    impl Disk {
        /// A tmpfs of `size` (`mount`'s form: `16m`) at `path`, made if missing.
        pub fn mount(path: &Path, size: &str) -> Result<Self, String> {
            std::fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let status = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(path)
                .stderr(Stdio::null())
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

        /// Copies what is on the disk to `keep`, for a look after the drill.
        pub fn keep_files(&self, keep: &Path) {
            if let Ok(files) = std::fs::read_dir(&self.path) {
                for file in files.flatten().filter(|f| f.file_name() != "filler") {
                    let _ = std::fs::copy(file.path(), keep.join(file.file_name()));
                }
            }
        }

        /// Unmounts it (once more: quietly nothing).
        pub fn unmount(&self) {
            let _ = Command::new("umount").arg("-l").arg(&self.path).stderr(Stdio::null()).status();
        }
    }

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
}
