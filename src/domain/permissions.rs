//! The global permission catalog (seed 2.3) and the per-role permission set.
//!
//! A set is a `u64` bitset over the 52 catalog keys, so a permission check on
//! the request path is one AND.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! catalog {
    ($( $variant:ident => $key:literal ),* $(,)?) => {
        /// One key of the catalog, in the seed's order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Permission { $( $variant, )* }

        impl Permission {
            /// Every key, in the seed's order.
            pub const ALL: &'static [Permission] = &[$( Permission::$variant, )*];

            /// The key's text, `org:<domain>:<verb>`.
            pub const fn key(self) -> &'static str {
                match self { $( Permission::$variant => $key, )* }
            }

            /// Parses a key; `None` when it is not in the catalog.
            pub fn parse(key: &str) -> Option<Permission> {
                match key { $( $key => Some(Permission::$variant), )* _ => None }
            }
        }
    };
}

catalog! {
    DecisionsCreate => "org:decisions:create",
    DecisionsRead => "org:decisions:read",
    DecisionsUpdate => "org:decisions:update",
    DecisionsDelete => "org:decisions:delete",
    DecisionsAccept => "org:decisions:accept",
    DecisionsReject => "org:decisions:reject",
    DecisionsDeprecate => "org:decisions:deprecate",
    MemoriesCreate => "org:memories:create",
    MemoriesRead => "org:memories:read",
    MemoriesUpdate => "org:memories:update",
    MemoriesDelete => "org:memories:delete",
    CapsulesCreate => "org:capsules:create",
    CapsulesRead => "org:capsules:read",
    CapsulesFreeze => "org:capsules:freeze",
    CapsulesSupersede => "org:capsules:supersede",
    TasksCreate => "org:tasks:create",
    TasksRead => "org:tasks:read",
    TasksUpdate => "org:tasks:update",
    TasksDelete => "org:tasks:delete",
    CommentsCreate => "org:comments:create",
    CommentsRead => "org:comments:read",
    SharingCreate => "org:sharing:create",
    SharingRead => "org:sharing:read",
    SharingRevoke => "org:sharing:revoke",
    TagsCreate => "org:tags:create",
    TagsRead => "org:tags:read",
    TagsDelete => "org:tags:delete",
    TagsAttach => "org:tags:attach",
    ChatCreate => "org:chat:create",
    ChatRead => "org:chat:read",
    ChatUpdate => "org:chat:update",
    ChatDelete => "org:chat:delete",
    ConflictsRead => "org:conflicts:read",
    ConflictsResolve => "org:conflicts:resolve",
    ImportsStart => "org:imports:start",
    ImportsRead => "org:imports:read",
    ImportsCancel => "org:imports:cancel",
    GraphRead => "org:graph:read",
    GraphManage => "org:graph:manage",
    NotificationsRead => "org:notifications:read",
    NotificationsManage => "org:notifications:manage",
    TeamRead => "org:team:read",
    TeamInvite => "org:team:invite",
    TeamManage => "org:team:manage",
    SettingsRead => "org:settings:read",
    SettingsManage => "org:settings:manage",
    BillingRead => "org:billing:read",
    BillingManage => "org:billing:manage",
    ProjectsCreate => "org:projects:create",
    ProjectsRead => "org:projects:read",
    ProjectsUpdate => "org:projects:update",
    ProjectsDelete => "org:projects:delete",
}

impl Permission {
    /// The `<domain>` part of the key.
    pub fn domain(self) -> &'static str {
        self.key().split(':').nth(1).unwrap_or_default()
    }

    /// The `<verb>` part of the key.
    pub fn verb(self) -> &'static str {
        self.key().rsplit(':').next().unwrap_or_default()
    }

    /// Marked sensitive in the UI (CONTRACT §3): every delete and manage,
    /// inviting, and revoking shares.
    pub fn is_sensitive(self) -> bool {
        matches!(self.verb(), "delete" | "manage")
            || matches!(self, Permission::TeamInvite | Permission::SharingRevoke)
    }

    const fn bit(self) -> u64 {
        1u64 << (self as u8)
    }
}

/// A set of catalog keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PermissionSet(u64);

/// Parsing failed: these keys are not in the catalog.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownPermissions(pub Vec<String>);

impl PermissionSet {
    /// No keys.
    pub const EMPTY: PermissionSet = PermissionSet(0);

    /// Every key of the catalog: what Owner always holds.
    pub const ALL: PermissionSet = PermissionSet((1u64 << Permission::ALL.len()) - 1);

    /// Member's default: every key but `*:delete` and `*:manage` (41 keys).
    pub fn member_default() -> PermissionSet {
        Permission::ALL
            .iter()
            .filter(|p| !matches!(p.verb(), "delete" | "manage"))
            .copied()
            .collect()
    }

    /// Whether `permission` is in the set.
    #[inline]
    pub const fn contains(self, permission: Permission) -> bool {
        self.0 & permission.bit() != 0
    }

    /// Whether every key of `other` is in this set.
    #[inline]
    pub const fn contains_all(self, other: PermissionSet) -> bool {
        other.0 & !self.0 == 0
    }

    /// Adds a key.
    pub fn insert(&mut self, permission: Permission) {
        self.0 |= permission.bit();
    }

    /// Keys in either set.
    pub const fn union(self, other: PermissionSet) -> PermissionSet {
        PermissionSet(self.0 | other.0)
    }

    /// Keys in this set but not in `other`.
    pub const fn difference(self, other: PermissionSet) -> PermissionSet {
        PermissionSet(self.0 & !other.0)
    }

    /// Number of keys.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set has no keys.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The keys, in catalog order.
    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .iter()
            .copied()
            .filter(move |p| self.contains(*p))
    }

    /// The keys as text, sorted lexicographically (the REST representation).
    /// The catalog's sorted order is computed once: sorting every role's
    /// keys on every read was 3 % of a role-list request.
    pub fn sorted_keys(self) -> Vec<&'static str> {
        static BY_KEY: std::sync::OnceLock<Vec<Permission>> = std::sync::OnceLock::new();
        let by_key = BY_KEY.get_or_init(|| {
            let mut all = Permission::ALL.to_vec();
            all.sort_unstable_by_key(|p| p.key());
            all
        });
        by_key
            .iter()
            .filter(|p| self.contains(**p))
            .map(|p| p.key())
            .collect()
    }

    /// Parses a list of keys; duplicates are allowed and collapse.
    pub fn parse<S: AsRef<str>>(keys: &[S]) -> Result<PermissionSet, UnknownPermissions> {
        let mut set = PermissionSet::EMPTY;
        let mut unknown = Vec::new();
        for key in keys {
            match Permission::parse(key.as_ref()) {
                Some(permission) => set.insert(permission),
                None => unknown.push(key.as_ref().to_owned()),
            }
        }
        if unknown.is_empty() {
            Ok(set)
        } else {
            Err(UnknownPermissions(unknown))
        }
    }

    /// The raw bits, for storage.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Rebuilds a set from stored bits, dropping any bit outside the catalog.
    pub const fn from_bits(bits: u64) -> PermissionSet {
        PermissionSet(bits & PermissionSet::ALL.0)
    }
}

impl FromIterator<Permission> for PermissionSet {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        let mut set = PermissionSet::EMPTY;
        for permission in iter {
            set.insert(permission);
        }
        set
    }
}

impl Serialize for PermissionSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            self.sorted_keys().serialize(serializer)
        } else {
            serializer.serialize_u64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for PermissionSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let keys = Vec::<String>::deserialize(deserializer)?;
            PermissionSet::parse(&keys).map_err(|unknown| {
                serde::de::Error::custom(format!("unknown permission keys: {:?}", unknown.0))
            })
        } else {
            u64::deserialize(deserializer).map(PermissionSet::from_bits)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_has_52_keys_in_16_domains() {
        assert_eq!(Permission::ALL.len(), 52);
        let mut domains: Vec<&str> = Permission::ALL.iter().map(|p| p.domain()).collect();
        domains.dedup();
        assert_eq!(domains.len(), 16);
        for (index, permission) in Permission::ALL.iter().enumerate() {
            assert_eq!(*permission as usize, index);
            assert_eq!(Permission::parse(permission.key()), Some(*permission));
        }
    }

    #[test]
    fn owner_and_member_counts() {
        assert_eq!(PermissionSet::ALL.len(), 52);
        let member = PermissionSet::member_default();
        assert_eq!(member.len(), 41);
        assert!(!member.contains(Permission::DecisionsDelete));
        assert!(!member.contains(Permission::SettingsManage));
        assert!(member.contains(Permission::TeamInvite));
        assert_eq!(
            Permission::ALL.iter().filter(|p| p.is_sensitive()).count(),
            13
        );
    }

    #[test]
    fn set_algebra() {
        let a: PermissionSet = [Permission::TeamRead, Permission::TeamInvite]
            .into_iter()
            .collect();
        let b: PermissionSet = [Permission::TeamRead].into_iter().collect();
        assert!(a.contains_all(b));
        assert!(!b.contains_all(a));
        assert_eq!(
            a.difference(b).iter().collect::<Vec<_>>(),
            vec![Permission::TeamInvite]
        );
        assert_eq!(b.union(a), a);
        assert!(PermissionSet::ALL.contains_all(a));
        assert!(PermissionSet::EMPTY.is_empty());
        assert_eq!(PermissionSet::from_bits(u64::MAX), PermissionSet::ALL);
    }

    #[test]
    fn parse_reports_every_unknown_key() {
        let parsed =
            PermissionSet::parse(&["org:team:read", "org:team:read", "org:nope:x", "admin"]);
        assert_eq!(
            parsed,
            Err(UnknownPermissions(vec![
                "org:nope:x".into(),
                "admin".into()
            ]))
        );
        let ok = PermissionSet::parse(&["org:team:read", "org:team:read"]);
        assert_eq!(ok.map(PermissionSet::len), Ok(1));
        assert_eq!(PermissionSet::parse::<&str>(&[]), Ok(PermissionSet::EMPTY));
    }

    #[test]
    fn format_is_sorted_and_round_trips() {
        let set: PermissionSet = [
            Permission::TeamRead,
            Permission::BillingRead,
            Permission::DecisionsCreate,
        ]
        .into_iter()
        .collect();
        assert_eq!(
            set.sorted_keys(),
            vec!["org:billing:read", "org:decisions:create", "org:team:read"]
        );
        let json = serde_json::to_string(&set).unwrap_or_default();
        let back: PermissionSet = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(back, set);

        let every = PermissionSet::ALL.sorted_keys();
        let mut expected: Vec<&str> = Permission::ALL.iter().map(|p| p.key()).collect();
        expected.sort_unstable();
        assert_eq!(every, expected);
    }
}
