//! The Redis layout: every key, the consumer group, the expiry rule, the scripts and
//! the formats Redis holds, in one place (as svix's `queue/redis.rs` does); its
//! version is `layout_version`'s. Below the
//! domains: what a domain keeps in Redis is named here, and written and read by the
//! one module that owns its format.
//!
//! Keys (`<ns>` is the namespace, `SECKILL_REDIS_NAMESPACE`; `<id>` a voucher's id):
//!
//! | key | type | holds | written by | expires |
//! | --- | --- | --- | --- | --- |
//! | `<ns>:{v<id>}:stock` | string | units left | warm-up, gate, give-backs | with the sale |
//! | `<ns>:{v<id>}:buyers` | hash | shoppers holding a grant, each its order id | warm-up, gate, settling, give-backs | with the sale |
//! | `<ns>:{v<id>}:window` | hash | `begins`, `ends`, `expires` (Unix ms), `paused`, `price`, `version`, `fair`, `secret` (grab tokens; never sent), `shards` (the sale's buckets), `ended` (the end a sale of several shards is over at by its bucket 0's clock, `sale::warm`); `layout` (the Redis layout it was warmed in, `layout_version`); `sold_out_at` (the first sell-out of a sale of one shard, for the report); `rebuilt_by` (the ticket of the rebuild that loaded it last, `sale::warm`) | warm-up (every operator change; a rebuild's load: `rebuilt_by`); the gate (`sold_out_at`) | with the sale |
//! | `<ns>:{v<id>}:orders` | stream | granted orders, read by group [`GROUP`] | gate | with the sale |
//! | `<ns>:{v<id>}:results` | hash | order id → grab result | gate, worker, give-backs | with the sale |
//! | `<ns>:{v<id>}:dlq` | stream | orders given up (dead letters) | worker | with the sale |
//! | `<ns>:{v<id>}:refused` | string | grabs the gate refused | gate | with the sale |
//! | `<ns>:{v<id>}:restocked` | set | cancelled orders whose unit came back | give-backs, warm-up | with the sale |
//! | `<ns>:{v<id>}:changes` | hash | stock change id → units it made (once each) | `sale::stock`, warm-up | with the sale |
//! | `<ns>:{v<id>}:rebuild` | string | a rebuild's ticket: its snapshot loads only while this holds it | `sale::warm` | [`REBUILD_DEADLINE`] after it was set (its load deletes it) |
//! | `<ns>:clock` | none | never written: routes the clock script to a node | `sale::gate::clock` | never written |
//! | `<ns>:sales_version` | string | counts operator changes to any sale | `sale::launch`; every process follows it (`bus::follow`) | never |
//! | `<ns>:last_sale` | sorted set | one member, `last`, scored with the highest sale id Redis loaded (raised before each load; a mark its node could not take is only logged) (a restored database older than Redis is refused at start, `sale::warm::from_a_later_database`) | `sale::warm` (each load, before it) | never |
//! | `<ns>:icr:order:<yyyymmdd>` | string | the day's order-id counter | `order_ids` (in blocks) | [`ORDER_IDS_KEPT`] after its last block |
//! | `<ns>:icr:master:{<ns>:icr:order:<yyyymmdd>}` | string | `<replication id> <ms>`: the master that took the counter's last block, and when (in the counter's slot): a counter last written under another master jumps ahead | `order_ids` (with each block) | [`ORDER_IDS_KEPT`] after its last block |
//! | `<ns>:icr:spare:{<yyyymmdd>.<n>}` | string | the day's spare order-id counter, in the slot across the slot space from the main one's ([`order_id_spare`]): drawn from while the main one fails a process | `order_ids` (in blocks) | [`ORDER_IDS_KEPT`] after its last block |
//! | `<ns>:icr:master:{<yyyymmdd>.<n>}` | string | the spare counter's master mark, as the main one's (in its slot) | `order_ids` (with each of its blocks) | [`ORDER_IDS_KEPT`] after its last block |
//! | `<ns>:events` | pub/sub channel | sale events | `bus` | a channel, not a key |
//! | `<ns>:attempts:addr:<address>` | hash | failed credential checks from one address | `auth::attempts` | at most [`ATTEMPTS_KEPT`] after its last change (a count under its allowance: that allowance's share of it per failure) |
//! | `<ns>:attempts:{<who>}` | hash | failed checks at one account (or the admin token), every address | `auth::attempts` | at most [`ATTEMPTS_KEPT`] after its last change (a count under its allowance: that allowance's share of it per failure) |
//! | `<ns>:attempts:{<who>}:<address>` | hash | failed checks at one account from one address (an IPv4 address or IPv6 /64), or from one IPv6 /48 (`<address>/48`) | `auth::attempts` | at most [`ATTEMPTS_KEPT`] after its last change (a count under its allowance: that allowance's share of it per failure) |
//! | `<ns>:attempts:known:<cookie>` | hash | failed checks at one account from one browser that signed in to it before (one per known-browser cookie that failed; a right password makes each) | `auth::attempts` | at most [`ATTEMPTS_KEPT`] after its last change (a count under its allowance: that allowance's share of it per failure) |
//! | `<ns>:sign_ins:<account>` | string | right passwords at one account (a keyed digest of its name) since the count began: past `auth::attempts::OFTEN`, its checks share half the hash pool | `auth::attempts` | [`SIGN_INS_KEPT`] after its first (the count's hour) |
//! | `<ns>:sign_ups:addr:<address>:<hour>` | string | sign-ups from one address this hour (the quota) | `auth::challenge` | [`SIGN_UPS_FROM_ADDRESS_KEPT`] after its last change |
//! | `<ns>:sign_ups:<minute>` | string | sign-ups this minute, every process (the challenge's work) | `auth::challenge` | [`SIGN_UPS_IN_MINUTE_KEPT`] after its last change |
//! | `<ns>:sign_up_challenge:<challenge>` | string | a sign-up challenge taken, until it expires | `auth::challenge` | when the challenge does (at most [`SIGN_UP_CHALLENGE_KEPT`]) |
//! | `<ns>:idempotency:{<caller>}:<key>` | string | a call's `Idempotency-Key` (digests of its caller and of the key): `pending <fingerprint>` while it is served, then `done <fingerprint> <status> <answer>` | `server::idempotency` | [`IDEMPOTENCY_KEPT`] after the answer |
//! | `<ns>:idempotency:{<caller>}` | string | the keys a caller took since this count began (the bound) | `server::idempotency` | [`IDEMPOTENCY_KEPT`] after its first |
//! | `<ns>:worker:<name>` | string | the token of the process holding a worker's name (a lease) | `worker::name` | [`WORKER_LEASE`] after its last renewal |
//!
//! The `expires` column is what a key's time to live must be: *with the sale* is the
//! sale's expiry below; a constant is the longest time to live it may have after the
//! write it names; *never* is no expiry. A test runs a sale day and holds every key
//! it leaves to its row (`tests/redis_keys.rs`).
//!
//! Every key of one voucher shares the hash tag `{v<id>}`, so each script call, stream
//! read and atomic pipeline lives in one Redis Cluster slot; scripts get every key
//! through `KEYS[]`.
//!
//! **Shards.** A sale made with `shards` K > 1 has K buckets: bucket 0 is the table
//! above, bucket b > 0 the same keys under a hash tag of its own, `{v<id>.<b>.<n>}`
//! (see [`Bucket::tag`]: each bucket in its own K-th of the slot space, so a Redis
//! Cluster spreads them over its masters). Each bucket is a sale of its own in Redis:
//! its units, its buyers (a shopper belongs to bucket [`bucket_of`] their id), its
//! stream, results, refusals, give-backs and stock changes; its window is a copy of
//! the sale's, with `shards`. Units move between buckets as stock changes
//! (`sale::refill`).
//!
//! **Expiry.** Every key of a sale expires at [`expires_at`] its end: the sale's end
//! plus [`DRAIN_GRACE_MS`], while the worker drains its stream; results stay readable
//! from the database after. Warm-up stores that moment in the window's `expires` and
//! sets it on the keys it makes; the scripts that make a key later read it from there
//! (gate, give-backs) or are handed it (`settle.lua`, the worker's dead letters).
//!
//! **Formats**, each written and read in one module: grab results
//! `<status>:<user id>[:<reason>]` (`orders::results`); stream entries, the order's
//! fields (`orders::entry`, which also sets the gate's arguments it writes them from); sale events (`bus`); the sampler's figures
//! (`live::figures`); gate answers (`sale::gate`).
//!
//! **Scripts** ([`Scripts`], loaded once and run by SHA): `grab.lua` (`sale::gate`),
//! `warm.lua` (`sale::warm`), `stock.lua` (`sale::stock`), `clock.lua`, `token.lua` and `refused.lua` (`sale::gate`), `settle.lua` (`orders::settle`), `fail.lua`
//! (`orders::fail`), `give_back.lua` (`orders::give_back`), `sample.lua`
//! (`live::figures`), `order_ids.lua` (`order_ids`), `attempt.lua` (`auth::attempts`), `lease.lua` (`worker::name`). `fail.lua` and `give_back.lua` share their core,
//! `lua/lib/unit_back.lua` (a unit back on sale, a buyer slot freed, the keys' expiry);
//! the gate and `token.lua` share `lua/lib/grab_token.lua`.

use redis::Script;
use std::time::Duration;

/// The keys of one voucher, in the order the scripts expect them.
#[derive(Clone, Debug)]
pub struct SaleKeys {
    /// Units left (string counter; the key is named `…:stock`).
    pub left: String,
    /// Set of user ids holding an order.
    pub buyers: String,
    /// Hash `begins`/`ends`/`expires` (Unix ms), `paused` (0/1), `price`, `version`,
    /// `fair` (0/1), `secret` (what grab tokens derive from), `shards` (the sale's
    /// buckets) and `sold_out_at` (the gate's first sell-out, Unix ms).
    pub window: String,
    /// Stream of granted orders, read by the worker's consumer group.
    pub orders: String,
    /// Hash order id → `status:user_id[:reason]`.
    pub results: String,
    /// Stream of orders that failed too often (dead letters).
    pub dlq: String,
    /// Count of grabs the gate refused (for the live refusal rate).
    pub refused: String,
    /// Set of cancelled order ids whose unit Redis has taken back (once each).
    pub given_back: String,
    /// Hash stock change id → units it added (> 0) or withdrew (< 0): each once.
    pub changes: String,
    /// A rebuild's ticket: its snapshot loads only while this holds it.
    pub rebuild: String,
}

/// One bucket of one sale: the voucher, its sale's shards, and the bucket among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket {
    pub voucher_id: i64,
    pub shards: u32,
    pub bucket: u32,
}

/// Hash slots of a Redis Cluster.
const SLOTS: u32 = 16_384;

impl Bucket {
    /// A sale of one shard: its only bucket (also bucket 0 of any sale).
    pub fn whole(voucher_id: i64) -> Self {
        Self { voucher_id, shards: 1, bucket: 0 }
    }

    /// The hash tag of the bucket's keys. Bucket 0's is the one-shard sale's, `v<id>`.
    /// Bucket b's is `v<id>.<b>.<n>`, with the first n that puts its slot in the K-th
    /// of the slot space b after bucket 0's. A cluster whose masters hold even runs of
    /// slots (`redis-cli --cluster create` makes them so) then holds a sale's buckets
    /// evenly: as many buckets as masters, one on each. Any process works it out alike.
    pub fn tag(&self) -> String {
        let whole = format!("v{}", self.voucher_id);
        if self.bucket == 0 || self.shards <= 1 {
            return whole;
        }
        let slice = |slot: u32| slot * self.shards / SLOTS;
        let want = (slice(slot_of(&whole)) + self.bucket) % self.shards;
        // About K tries.
        first_tag(|n| format!("v{}.{}.{n}", self.voucher_id, self.bucket), |slot| slice(slot) == want, 1_000_000)
    }
}

impl SaleKeys {
    /// The keys of a sale's bucket 0 (the whole sale when it has one shard).
    pub fn new(namespace: &str, voucher_id: i64) -> Self {
        Self::of_bucket(namespace, Bucket::whole(voucher_id))
    }

    /// The keys of one bucket of a sale: each bucket has its own hash tag.
    pub fn of_bucket(namespace: &str, bucket: Bucket) -> Self {
        let base = format!("{namespace}:{{{}}}", bucket.tag());
        Self {
            left: format!("{base}:stock"),
            buyers: format!("{base}:buyers"),
            window: format!("{base}:window"),
            orders: format!("{base}:orders"),
            results: format!("{base}:results"),
            dlq: format!("{base}:dlq"),
            refused: format!("{base}:refused"),
            given_back: format!("{base}:restocked"),
            changes: format!("{base}:changes"),
            rebuild: format!("{base}:rebuild"),
        }
    }
}

/// The most shards a sale may have.
pub const MAX_SHARDS: u32 = 64;

/// The bucket a shopper belongs to in a sale of `shards` buckets: a hash of the id
/// (splitmix64's finaliser), so consecutive ids spread evenly and one shopper always
/// meets the same bucket ("one per shopper" stays one check in one bucket).
pub fn bucket_of(user_id: i64, shards: u32) -> u32 {
    if shards <= 1 {
        return 0;
    }
    let mut x = (user_id as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % u64::from(shards)) as u32
}

/// Bucket `bucket`'s share of `units` split over `shards` buckets: as even as can be,
/// the first buckets taking one more.
pub fn share(units: i64, shards: u32, bucket: u32) -> i64 {
    let shards = i64::from(shards.max(1));
    units / shards + i64::from(i64::from(bucket) < units % shards)
}

/// Consumer group of the order streams: every process's worker reads through it.
pub const GROUP: &str = "persist";

/// Pub/sub channel of sale events (see `bus`).
pub fn events_channel(namespace: &str) -> String {
    format!("{namespace}:events")
}

/// The count of operator changes to any sale (its key keeps the name `sales_version`;
/// a version is a row's, `vouchers.version`). Each change bumps it after Redis holds
/// the change; every process reads it a few times a second and, when it moved, trusts
/// nothing it cached of a sale (a change whose sale event it missed is caught up).
pub fn sale_changes(namespace: &str) -> String {
    format!("{namespace}:sales_version")
}

/// The highest sale id this namespace's Redis ever loaded (one member, `last`, whose
/// score is the id; `ZADD GT` raises it atomically, never lowers it, and it never
/// expires). A sale's own keys expire a day after its end, so only this mark still
/// tells, weeks later, that Redis was written by a later life of the database
/// (`sale::warm::from_a_later_database`).
pub fn last_sale(namespace: &str) -> String {
    format!("{namespace}:last_sale")
}

/// The failed credential checks from one address (an IPv6 /64 is one), at any account;
/// like every attempts counter, it expires a while after its last change.
pub fn attempts_from_address(namespace: &str, block: &str) -> String {
    format!("{namespace}:attempts:addr:{block}")
}

/// The failures at one account (`who`: `name:<name>`, `op:<name>`, `token`) from every
/// address. It shares its hash tag with [`attempts_at_account_from`], so one script
/// call reads both.
pub fn attempts_at_account(namespace: &str, who: &str) -> String {
    format!("{namespace}:attempts:{{{who}}}")
}

/// The failures at one account from one address (an IPv6 /64 is one).
pub fn attempts_at_account_from(namespace: &str, who: &str, block: &str) -> String {
    format!("{namespace}:attempts:{{{who}}}:{block}")
}

/// A caller's `Idempotency-Key` and what its first call answered, and the caller's
/// count of keys (`caller` and `key` digests, so neither names anybody and any key
/// fits; one hash tag, so both are written in one step).
pub fn idempotency(namespace: &str, caller: &str, key: &str) -> (String, String) {
    let count = format!("{namespace}:idempotency:{{{caller}}}");
    (format!("{count}:{key}"), count)
}

/// The failures at one account from one browser that signed in to it before
/// (`cookie`: a keyed digest of the account and the cookie's random number, so the key
/// names nobody): one per known-browser cookie that failed, each made by a right
/// password.
pub fn attempts_from_known_browsers(namespace: &str, cookie: &str) -> String {
    format!("{namespace}:attempts:known:{cookie}")
}

/// The right passwords given at one account since its count began (`account`: a keyed
/// digest of its name, so the key names nobody; only a right password makes one).
pub fn sign_ins_at(namespace: &str, account: &str) -> String {
    format!("{namespace}:sign_ins:{account}")
}

/// Sign-ups from one address (an IPv6 /64 is one) in one hour (`hour`: Unix hours).
pub fn sign_ups_from_address(namespace: &str, block: &str, hour: i64) -> String {
    format!("{namespace}:sign_ups:addr:{block}:{hour}")
}

/// Sign-ups over every process in one minute (`minute`: Unix minutes): how hard the
/// next sign-up challenge is.
pub fn sign_ups_in_minute(namespace: &str, minute: i64) -> String {
    format!("{namespace}:sign_ups:{minute}")
}

/// A sign-up challenge already solved (each is taken once), until it expires.
pub fn sign_up_challenge_used(namespace: &str, challenge: &str) -> String {
    format!("{namespace}:sign_up_challenge:{challenge}")
}

/// The lease on a worker's name (`SECKILL_WORKER_NAME`): one process holds it.
pub fn worker_name_lease(namespace: &str, name: &str) -> String {
    format!("{namespace}:worker:{name}")
}

/// A key never written: `clock.lua` names it to be routed to one node when no sale is
/// named (`server_time`, the live feed's clock).
pub fn clock_key(namespace: &str) -> String {
    format!("{namespace}:clock")
}

/// The day's order-id counter (`day` as `yyyymmdd`): ids are taken from it in blocks.
pub fn order_id_counter(namespace: &str, day: &str) -> String {
    format!("{namespace}:icr:order:{day}")
}

/// The day's spare order-id counter (`day` as `yyyymmdd`): a process draws from it
/// while the main one ([`order_id_counter`]) fails it, so a master lost with the main
/// counter stops no grab on the other masters (`order_ids`). Its hash tag,
/// `<yyyymmdd>.<n>`, has the first n that puts it in the slot half the slot space
/// away from the main counter's: on another master of any cluster whose masters
/// hold even runs of slots (as for a sale's buckets, [`Bucket::tag`]). About 16,384
/// tries, once a day; the bound only keeps the loop finite.
pub fn order_id_spare(namespace: &str, day: &str) -> String {
    let across = (slot_of(&order_id_counter(namespace, day)) + SLOTS / 2) % SLOTS;
    let tag = first_tag(|n| format!("{day}.{n}"), |slot| slot == across, 2_000_000);
    format!("{namespace}:icr:spare:{{{tag}}}")
}

/// A key's (or hash tag's) Redis Cluster slot.
fn slot_of(key: &str) -> u32 {
    u32::from(super::redis_conn::slot(key.as_bytes()))
}

/// The first of `tag(0)`, `tag(1)`, … whose slot `fits` (CRC16 spreads them evenly:
/// about as many tries as one slot in how many fit), or `tag(0)` when none of the
/// first `tries` does (the bound only keeps the loop finite).
fn first_tag(tag: impl Fn(u32) -> String, fits: impl Fn(u32) -> bool, tries: u32) -> String {
    (0..tries).map(&tag).find(|t| fits(slot_of(t))).unwrap_or_else(|| tag(0))
}

/// The master mark of an order-id counter (`counter`, [`order_id_counter`]'s or
/// [`order_id_spare`]'s): which master took its last block. Its hash tag is the
/// counter's own tag (the spare's), or else the counter's whole name (the main
/// one's), so a Redis Cluster keeps the two in one slot.
pub fn order_id_master(namespace: &str, counter: &str) -> String {
    let tag = counter.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map_or(counter, |(tag, _)| tag);
    format!("{namespace}:icr:master:{{{tag}}}")
}

/// How long after its end a sale's Redis state is kept: the worker drains its stream
/// meanwhile; then every key of the voucher expires.
pub const DRAIN_GRACE_MS: i64 = 24 * 3600 * 1000;

/// How long a guessing-limit counter lasts after its last change (`auth::attempts`).
pub const ATTEMPTS_KEPT: Duration = Duration::from_secs(24 * 3600);
/// How long an account's count of right passwords lasts after its first: the hour
/// `auth::attempts::OFTEN` is counted over.
pub const SIGN_INS_KEPT: Duration = Duration::from_secs(3600);
/// How long a call's `Idempotency-Key` keeps its answer (Stripe's 24 hours).
pub const IDEMPOTENCY_KEPT: Duration = Duration::from_secs(24 * 3600);
/// How long an address's sign-up count for an hour is kept (the quota's hour).
pub const SIGN_UPS_FROM_ADDRESS_KEPT: Duration = Duration::from_secs(3600);
/// How long a minute's sign-up count is kept (the challenge's work reads the last few).
pub const SIGN_UPS_IN_MINUTE_KEPT: Duration = Duration::from_secs(180);
/// How long a sign-up challenge is good for after it is issued: a taken one is kept
/// until it expires, so at most this long (`auth::challenge`).
pub const SIGN_UP_CHALLENGE_KEPT: Duration = Duration::from_secs(600);
/// How long a day's order-id counter is kept after its last block was taken (past
/// the day, for processes whose clocks lag).
pub const ORDER_IDS_KEPT: Duration = Duration::from_secs(2 * 24 * 3600);
/// How long a worker's name is held without being renewed (`worker::name`).
pub const WORKER_LEASE: Duration = Duration::from_secs(5);
/// Longest a rebuild holds the database's lock on a voucher waiting for Redis to load
/// its snapshot, and how long its ticket lives (`sale::warm`).
pub const REBUILD_DEADLINE: Duration = Duration::from_secs(2);

/// When every key of a sale that ends at `ends_at_ms` expires (Unix ms).
pub fn expires_at(ends_at_ms: i64) -> i64 {
    ends_at_ms + DRAIN_GRACE_MS
}

/// A script of `lua/`, by file name, after the `lua/lib/` files it calls (Redis runs
/// one source per script: what two scripts share is prepended to each).
macro_rules! lua {
    ($file:literal $(, uses $lib:literal)*) => {
        Script::new(concat!($(include_str!(concat!("../../lua/lib/", $lib)), "\n",)* include_str!(concat!("../../lua/", $file))))
    };
}

/// The scripts every request and background task may run. Each is called, and its
/// arguments and answer are typed, in the one module that owns it (see the table
/// above).
pub struct Scripts {
    pub grab: Script,
    pub warm: Script,
    pub fail: Script,
    pub settle: Script,
    pub give_back: Script,
    pub stock: Script,
    pub clock: Script,
    pub token: Script,
    pub sample: Script,
    pub attempt: Script,
    pub lease: Script,
    pub refused: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            grab: lua!("grab.lua", uses "grab_token.lua"),
            warm: lua!("warm.lua"),
            fail: lua!("fail.lua", uses "unit_back.lua"),
            settle: lua!("settle.lua"),
            give_back: lua!("give_back.lua", uses "unit_back.lua"),
            stock: lua!("stock.lua"),
            clock: lua!("clock.lua"),
            token: lua!("token.lua", uses "grab_token.lua"),
            sample: lua!("sample.lua"),
            attempt: lua!("attempt.lua"),
            lease: lua!("lease.lua"),
            refused: lua!("refused.lua"),
        }
    }
}

/// `order_ids.lua`, for the order-id blocks each process keeps (`order_ids::OrderIds`).
pub fn order_ids_script() -> Script {
    lua!("order_ids.lua")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_voucher_share_a_hash_tag() {
        let k = SaleKeys::new("seckill", 42);
        for key in [&k.left, &k.buyers, &k.window, &k.orders, &k.results, &k.dlq, &k.refused, &k.given_back, &k.changes]
        {
            assert!(key.starts_with("seckill:{v42}:"), "{key}");
        }
        assert_ne!(SaleKeys::new("seckill", 4).left, SaleKeys::new("seckill", 42).left);
        let third = Bucket { voucher_id: 42, shards: 3, bucket: 2 };
        let b = SaleKeys::of_bucket("seckill", third);
        let tag = format!("seckill:{{{}}}:", third.tag());
        assert!(tag.starts_with("seckill:{v42.2."), "{tag}");
        for key in [&b.left, &b.buyers, &b.window, &b.orders, &b.results, &b.dlq, &b.refused, &b.given_back, &b.changes]
        {
            assert!(key.starts_with(&tag), "{key}");
        }
        let zero = Bucket { voucher_id: 42, shards: 3, bucket: 0 };
        assert_eq!(SaleKeys::of_bucket("seckill", zero).left, k.left, "bucket 0 is the one-shard layout");
    }

    /// The spare counter sits across the slot space from the main one, and each
    /// counter's master mark in its counter's slot.
    #[test]
    fn the_spare_order_id_counter_is_across_the_slots_from_the_main_one() {
        use crate::backend::redis_conn::slot;
        for (namespace, day) in [("seckill", "20261130"), ("t42", "20270101"), ("shop", "20261201")] {
            let (main, spare) = (order_id_counter(namespace, day), order_id_spare(namespace, day));
            assert!(spare.starts_with(&format!("{namespace}:icr:spare:{{{day}.")), "{spare}");
            let (a, b) = (u32::from(slot(main.as_bytes())), u32::from(slot(spare.as_bytes())));
            assert_eq!((a + SLOTS / 2) % SLOTS, b, "{main} and {spare}");
            for counter in [&main, &spare] {
                let mark = order_id_master(namespace, counter);
                assert_eq!(slot(mark.as_bytes()), slot(counter.as_bytes()), "{mark} beside {counter}");
            }
        }
        assert_eq!(order_id_master("s", "s:icr:order:20261130"), "s:icr:master:{s:icr:order:20261130}");
    }

    #[test]
    fn a_sales_buckets_take_a_slice_of_the_slots_each() {
        for (voucher_id, shards) in [(1, 3), (42, 3), (7, 8), (99, 64)] {
            let slices: std::collections::HashSet<u32> = (0..shards)
                .map(|bucket| {
                    let tag = Bucket { voucher_id, shards, bucket }.tag();
                    u32::from(crate::backend::redis_conn::slot(tag.as_bytes())) * shards / SLOTS
                })
                .collect();
            assert_eq!(slices.len(), shards as usize, "voucher {voucher_id}, {shards} shards");
        }
    }

    #[test]
    fn shoppers_spread_over_buckets_and_units_split_whole() {
        assert_eq!(bucket_of(12345, 1), 0);
        let mut counts = [0usize; 3];
        for user in 1..=3000 {
            counts[bucket_of(user, 3) as usize] += 1;
            assert_eq!(bucket_of(user, 3), bucket_of(user, 3));
        }
        assert!(counts.iter().all(|&c| (900..=1100).contains(&c)), "{counts:?}");
        for (units, shards) in [(10, 3), (2, 3), (0, 4), (1_000_000, 64), (7, 1)] {
            let parts: Vec<i64> = (0..shards).map(|b| share(units, shards, b)).collect();
            assert_eq!(parts.iter().sum::<i64>(), units, "{parts:?}");
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1, "{parts:?}");
        }
    }
}
