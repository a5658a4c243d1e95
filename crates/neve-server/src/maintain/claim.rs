//! Claims: servers and workers maintaining one warehouse take turns on each table, instead of
//! all merging the same small files at once (which is safe, as the log lets one merge commit
//! and the others lose the race, but multiplies the reads, the CPU and the orphans by the
//! number of servers).
//!
//! A claim is the object `_maintenance/claim-<slot>` in the table's folder, made with a
//! create-only PUT (the same guarantee commits rest on; no lock service), `<slot>` a minute of
//! the wall clock (Unix milliseconds / 60,000). Whoever creates it maintains the table; a
//! visit that finds it skips the table until its next turn. A visit still running near the end
//! of its minute claims the next one; a visit that ends deletes its claims, so the next visit
//! (a `neve maintain --once` run right after, say) goes ahead at once. A holder that dies
//! keeps the table from being maintained until its minute is over, and the next holder
//! deletes its claim. Clocks that disagree by more than a few seconds only let two visits
//! overlap near a minute's edge: as without claims.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use neve_core::TableLocation;
use object_store::{ObjectStoreExt, PutMode, PutPayload};

/// The length of a claim's slot.
pub(crate) const SLOT_MS: i64 = 60_000;
/// How long before its slot ends a visit still running claims the next.
const RENEW_BEFORE_MS: i64 = 5_000;

/// A table this visit holds.
pub(crate) struct Claim {
    location: TableLocation,
    /// The slots claimed (or being claimed: a slot is written here before its PUT, so a
    /// release that interrupts the PUT still deletes it).
    slots: Arc<Mutex<Vec<i64>>>,
    renew: tokio::task::JoinHandle<()>,
}

/// Whether a visit may go ahead.
pub(crate) enum Taken {
    /// This visit holds the table.
    Here(Claim),
    /// Another server or worker is maintaining it.
    Elsewhere,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn path(location: &TableLocation, slot: i64) -> object_store::path::Path {
    location.child(&format!("_maintenance/claim-{slot}"))
}

/// Creates the claim of `slot`: false when it is there already.
async fn create(location: &TableLocation, slot: i64) -> object_store::Result<bool> {
    let body = serde_json::json!({
        "by": format!("neve {} pid {}", hostname(), std::process::id()),
        "at": now_ms(),
    })
    .to_string();
    let put = location
        .store
        .put_opts(
            &path(location, slot),
            PutPayload::from(body.into_bytes()),
            PutMode::Create.into(),
        )
        .await;
    match put {
        Ok(_) => Ok(true),
        Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Claim the table at `location` for a visit.
pub(crate) async fn take(location: &TableLocation) -> object_store::Result<Taken> {
    let slot = now_ms().div_euclid(SLOT_MS);
    if !create(location, slot).await? {
        return Ok(Taken::Elsewhere);
    }
    // Claims of the minutes before are their holders' that died (one still running would
    // hold this minute too): nobody will ask for them again.
    for old in [slot - 1, slot - 2] {
        match location.store.delete(&path(location, old)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                tracing::debug!(table = %location.display, error = %e, "maintenance: an old claim stays")
            }
        }
    }
    let slots = Arc::new(Mutex::new(vec![slot]));
    let renew = {
        let (location, slots) = (location.clone(), slots.clone());
        tokio::spawn(async move {
            let mut slot = slot;
            loop {
                let wait = (slot + 1) * SLOT_MS - RENEW_BEFORE_MS - now_ms();
                if wait > 0 {
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                }
                slot += 1;
                slots.lock().expect("claims").push(slot);
                // Taken by another (a clock ahead of this one), or the store failed: the
                // visit goes on unclaimed, as it would without claims, and leaves that claim
                // alone.
                if !matches!(create(&location, slot).await, Ok(true)) {
                    slots.lock().expect("claims").retain(|s| *s != slot);
                    return;
                }
            }
        })
    };
    Ok(Taken::Here(Claim {
        location: location.clone(),
        slots,
        renew,
    }))
}

impl Claim {
    /// The visit is over: the table is free for the next.
    pub(crate) async fn release(self) {
        self.renew.abort();
        let _ = self.renew.await;
        let slots = std::mem::take(&mut *self.slots.lock().expect("claims"));
        for slot in slots {
            match self
                .location
                .store
                .delete(&path(&self.location, slot))
                .await
            {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                // It ends with its minute.
                Err(e) => {
                    tracing::debug!(table = %self.location.display, error = %e, "maintenance: a claim stays")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_visit_holds_a_table_at_a_time() {
        let table = TableLocation::memory("claims");
        let Taken::Here(first) = take(&table).await.unwrap() else {
            panic!("a table nobody holds is taken")
        };
        assert!(matches!(take(&table).await.unwrap(), Taken::Elsewhere));
        first.release().await;
        // Released: the next visit goes ahead at once, and leaves nothing behind.
        let Taken::Here(second) = take(&table).await.unwrap() else {
            panic!("a released table is taken again")
        };
        second.release().await;
        let left = table
            .store
            .list_with_delimiter(Some(&table.child("_maintenance")))
            .await
            .unwrap();
        assert!(left.objects.is_empty(), "{:?}", left.objects);
    }

    #[tokio::test]
    async fn a_dead_holders_claim_is_cleared_by_the_next_minutes_holder() {
        let table = TableLocation::memory("claims");
        let slot = now_ms().div_euclid(SLOT_MS);
        // A holder that died in the minute before.
        assert!(create(&table, slot - 1).await.unwrap());
        let Taken::Here(claim) = take(&table).await.unwrap() else {
            panic!("the last minute's claim does not hold this one")
        };
        let gone = table.store.head(&path(&table, slot - 1)).await;
        assert!(
            matches!(gone, Err(object_store::Error::NotFound { .. })),
            "{gone:?}"
        );
        claim.release().await;
    }
}
