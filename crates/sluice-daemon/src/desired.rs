//! How the desired state is persisted (whole, or as a journaled addition;
//! see `state.rs`) and how a restarted daemon reads it back.

use sluice_spec::{IndexedSpec, Spec, SpecError, ValidSpec};

use crate::candidate::Candidate;
use crate::control::State;
use crate::state::{Addition, JOURNAL_LIMIT};
use crate::syncer::Pending;

/// An addition's journal line, written before the addition is applied
/// and syncing meanwhile ([`State::journal_ahead`]).
pub(crate) struct Ahead {
    version: u64,
    sync: Pending,
}

impl State {
    /// Writes the journal line of an addition about to be applied (it
    /// would make the next version) and starts its sync; `None` when it
    /// is not to be journaled (the journal is full: the whole spec is
    /// written after the apply) or the line could not be written (it is
    /// tried again after the apply).
    pub(crate) fn journal_ahead(&mut self, (add, source): (&str, &str)) -> Option<Ahead> {
        if self.journal_len >= JOURNAL_LIMIT {
            return None;
        }
        let version = self.version + 1;
        let a = Addition {
            resource_version: version,
            source: source.to_string(),
            add: add.to_string(),
        };
        let file = self.dir.append_unsynced(&a).ok()?;
        Some(Ahead {
            version,
            sync: self.syncer.sync(file),
        })
    }

    /// The addition `ahead` was written for applied: it becomes the
    /// desired state at its version once its line is durable (if the sync
    /// failed, the whole spec is written instead).
    pub(crate) fn made_desired_ahead(
        &mut self,
        spec: IndexedSpec,
        ahead: Ahead,
        applied: sluice_dataplane::Applied,
    ) -> crate::change::Changed {
        let version = ahead.version;
        match ahead.sync.wait() {
            Ok(()) => self.journal_len += 1,
            Err(e) => {
                tracing::warn!("cannot sync the journal ({e}): writing the desired state whole");
                self.persist(version, &spec, None);
            }
        }
        self.desired = Some(spec);
        self.version = version;
        crate::change::Changed { version, applied }
    }

    /// The addition `ahead` was written for failed: its line is taken
    /// back before the failure is answered, so a restart does not apply
    /// it.
    pub(crate) fn revoke(&mut self, ahead: Ahead) {
        // The line's own sync first: the revocation must land after it.
        let _ = ahead.sync.wait();
        if let Err(e) = self.dir.revoke(ahead.version) {
            tracing::error!(
                "cannot take back the journal line of a failed addition ({e}): a restart \
                 would apply it"
            );
        }
    }

    /// Persists version `version` of the desired state, `spec`: an
    /// addition (`added`: its text and source; callers pass it only for an
    /// addition to a desired state, which is persisted) is journaled;
    /// anything else, and every `JOURNAL_LIMIT`-th addition, writes the
    /// whole spec.
    pub(crate) fn persist(&mut self, version: u64, spec: &Spec, added: Option<(&str, &str)>) {
        let persisted = match added {
            Some((add, source)) if self.journal_len < JOURNAL_LIMIT => {
                let a = Addition {
                    resource_version: version,
                    source: source.to_string(),
                    add: add.to_string(),
                };
                self.dir.append(&a).map(|()| self.journal_len += 1)
            }
            _ => self
                .dir
                .save(version, &spec.to_json())
                .map(|()| self.journal_len = 0),
        };
        if let Err(e) = persisted {
            // The data plane runs the spec; say that it will not survive a
            // restart rather than pretend.
            tracing::error!("cannot persist the desired state: {e}");
        }
    }

    /// Applies the persisted desired state, if any (a daemon restart): the
    /// whole spec last written, with the additions journaled since.
    pub(crate) fn restore(&mut self) {
        let Some(p) = self.dir.load() else {
            return;
        };
        // What cannot be re-applied is kept beside, never overwritten by
        // the next apply, and versions go on from the persisted one.
        self.version = p.additions.last().map_or(p.version, |a| a.resource_version);
        let Some(text) = p.spec else {
            // Everything moved away (`sluice migrate`): nothing to run.
            return;
        };
        let version = self.version;
        let set_aside = |dir: &crate::state::StateDir| match dir.set_aside() {
            Ok(p) => format!("it is kept in {}", p.display()),
            Err(e) => format!("and it could not be set aside: {e}"),
        };
        let types: Vec<&str> = self.registry.iter().map(|t| t.name).collect();
        // Replayed in place, each addition checked against the index the
        // one before kept up to date (`sluice_spec::add_to`).
        let spec = self.parse(&text, "desired state").and_then(|base| {
            let base = IndexedSpec::from(base);
            p.additions.iter().try_fold(base, |spec, a| {
                let addition = sluice_spec::parse_additions(&a.add, &a.source)?;
                sluice_spec::add_to(Some(spec), addition, &types)
                    .map(ValidSpec::into_indexed)
                    .map_err(|r| match r.error {
                        sluice_spec::AddError::Invalid(e) => e,
                        sluice_spec::AddError::Exists { kind, name, field } => SpecError::new(
                            a.source.clone(),
                            sluice_spec::Location::default(),
                            field,
                            format!(
                                "the journaled addition of {kind} {name} finds it there already"
                            ),
                        ),
                    })
            })
        });
        let spec = match spec {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(
                    "the persisted desired state (version {version}) does not load: {e}; \
                     starting empty; {}",
                    set_aside(&self.dir)
                );
                return;
            }
        };
        let candidate = Candidate::from(spec.into_spec());
        match self.apply_spec(&candidate) {
            Ok(_) => {
                tracing::info!("re-applied the desired state (version {version})");
                self.desired = Some(candidate.into_desired());
                self.journal_len = p.additions.len();
            }
            Err(e) => tracing::error!(
                "cannot re-apply the persisted desired state (version {version}): {e}; \
                 starting empty; {}",
                set_aside(&self.dir)
            ),
        }
    }
}
