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
//! (a `neve maintain --once` run right after, say) goes ahead at once. A holder that dies (or
//! a server stopped during a visit) leaves its claim, which holds the table until its minute,
//! or the next one it had already claimed, is over; gc deletes claims of minutes past. When
//! clocks disagree by more than a few seconds, or a claim cannot be written, two visits may
//! run at once, as without claims: the log lets one merge commit.

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
    /// The slots claimed (each once its PUT said so).
    slots: Arc<Mutex<Vec<i64>>>,
    /// Dropped to stop the renewing, which then ends between PUTs, never during one.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    renew: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Claim {
    /// Not released (the visit panicked): the renewing stops, so the claims end with their
    /// minutes instead of holding the table for as long as this process lives.
    fn drop(&mut self) {
        if let Some(r) = &self.renew {
            r.abort();
        }
    }
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
        "by": neve_core::table::default_writer(),
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

/// Claim the table at `location` for a visit.
pub(crate) async fn take(location: &TableLocation) -> object_store::Result<Taken> {
    take_in_slots(location, SLOT_MS, RENEW_BEFORE_MS).await
}

/// [`take`] with slots of `slot_ms`, renewed `renew_before_ms` before they end (short ones in
/// tests).
async fn take_in_slots(
    location: &TableLocation,
    slot_ms: i64,
    renew_before_ms: i64,
) -> object_store::Result<Taken> {
    let slot = now_ms().div_euclid(slot_ms);
    if !create(location, slot).await? {
        return Ok(Taken::Elsewhere);
    }
    let slots = Arc::new(Mutex::new(vec![slot]));
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let renew = {
        let (location, slots) = (location.clone(), slots.clone());
        tokio::spawn(async move {
            let mut slot = slot;
            loop {
                let wait = (slot + 1) * slot_ms - renew_before_ms - now_ms();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)) => {}
                    _ = &mut stopped => return,
                }
                slot += 1;
                // Taken by another (a clock ahead of this one), or the store failed: the
                // visit goes on unclaimed, as it would without claims.
                if !matches!(create(&location, slot).await, Ok(true)) {
                    return;
                }
                slots.lock().expect("claims").push(slot);
            }
        })
    };
    Ok(Taken::Here(Claim {
        location: location.clone(),
        slots,
        stop: Some(stop),
        renew: Some(renew),
    }))
}

impl Claim {
    /// The visit is over: the table is free for the next.
    pub(crate) async fn release(mut self) {
        // A PUT under way ends first, so every claim it made is known below.
        drop(self.stop.take());
        if let Some(r) = self.renew.take() {
            let _ = r.await;
        }
        let slots = std::mem::take(&mut *self.slots.lock().expect("claims"));
        for slot in slots {
            match self
                .location
                .store
                .delete(&path(&self.location, slot))
                .await
            {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                // It ends with its minute, and gc deletes it.
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
    async fn a_claim_dropped_unreleased_stops_renewing() {
        let table = TableLocation::memory("claims");
        let Taken::Here(claim) = take(&table).await.unwrap() else {
            panic!("a table nobody holds is taken")
        };
        let renew = claim.renew.as_ref().unwrap().abort_handle();
        drop(claim);
        for _ in 0..200 {
            if renew.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(renew.is_finished(), "renewing goes on for a dropped claim");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_visit_claims_the_next_slots_and_releases_them_all() {
        let table = TableLocation::memory("claims");
        let claims = || async {
            table
                .store
                .list_with_delimiter(Some(&table.child("_maintenance")))
                .await
                .unwrap()
                .objects
                .len()
        };
        // Slots of 400 ms, renewed 250 ms before they end.
        let Taken::Here(claim) = take_in_slots(&table, 400, 250).await.unwrap() else {
            panic!("a table nobody holds is taken")
        };
        tokio::time::sleep(Duration::from_millis(1300)).await;
        // Still running three slots later: each slot was claimed in turn, so another visit
        // now finds the table held.
        let held = claim.slots.lock().unwrap().clone();
        assert!(held.len() >= 3, "{held:?}");
        assert!(held.windows(2).all(|w| w[1] == w[0] + 1), "{held:?}");
        assert!(matches!(
            take_in_slots(&table, 400, 250).await.unwrap(),
            Taken::Elsewhere
        ));
        assert_eq!(claims().await, held.len());
        claim.release().await;
        assert_eq!(claims().await, 0, "every claim made is deleted");
    }
}
