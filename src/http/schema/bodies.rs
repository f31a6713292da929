//! The schemas of the workspace resources' request bodies. The bodies are
//! domain types (the domain parses and validates them); how they are
//! documented is HTTP's concern, so their schemas are declared here, one
//! line a field, from the same field builders the rest of the document uses.

use std::borrow::Cow;

use utoipa::openapi::schema::RefBuilder;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type,
};
use utoipa::openapi::{Ref, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::fields;
use crate::domain::resources::analyses::{Finding, ReportAnalysis};
use crate::domain::resources::capsules::{CreateCapsule, SupersedeCapsule, UpdateCapsule};
use crate::domain::resources::decisions::{
    ChangeStatus, CreateDecision, DecisionStatus, UpdateDecision,
};
use crate::domain::resources::imports::{ImportResult, StartImport};
use crate::domain::resources::memories::{CreateMemory, UpdateMemory};
use crate::domain::resources::projects::{CreateProject, UpdateProject};
use crate::domain::resources::tasks::{CreateTask, TaskStatus, UpdateTask};
use crate::ids::ResourceId;

/// A body: an object of these properties, these required, nothing else.
fn object(
    description: &str,
    required: &[&str],
    properties: Vec<(&str, RefOr<Schema>)>,
) -> RefOr<Schema> {
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (name, schema) in properties {
        object = object.property(name, schema);
    }
    for name in required {
        object = object.required(*name);
    }
    object.into()
}

/// A property that is another component, with its own description here.
fn component<T: ToSchema>(description: &str) -> RefOr<Schema> {
    RefBuilder::new()
        .ref_location_from_schema_name(T::name())
        .description(Some(description))
        .into()
}

/// Implements the schema of a body type: its description, its required
/// properties, each property's schema, and the components it refers to.
macro_rules! body {
    (
        $ty:ident, $description:literal,
        required [$($required:literal),*],
        { $($property:literal: $schema:expr),* $(,)? }
        $(, refers [$($component:ty),*])?
    ) => {
        impl PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                object(
                    $description,
                    &[$($required),*],
                    vec![$(($property, RefOr::from($schema))),*],
                )
            }
        }

        impl ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }

            fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
                $($(
                    schemas.push((
                        <$component as ToSchema>::name().into_owned(),
                        <$component as PartialSchema>::schema(),
                    ));
                    <$component as ToSchema>::schemas(schemas);
                )*)?
                let _ = schemas;
            }
        }
    };
}

body!(CreateDecision, "Body of `POST …/decisions`.", required ["title"], {
    "title": fields::title(),
    "statement": fields::body_text(),
    "rationale": fields::body_text(),
    "tags": fields::tags(),
    "links": fields::links(),
    "status": fields::new_decision_status(),
});

body!(UpdateDecision, "Body of `PATCH …/decisions/{id}`.", required [], {
    "title": fields::title(),
    "statement": fields::body_text(),
    "rationale": fields::body_text(),
    "tags": fields::tags(),
    "links": fields::links(),
});

body!(ChangeStatus, "Body of `POST …/decisions/{id}/status`.", required ["status"], {
    "status": component::<DecisionStatus>("The target status."),
}, refers [DecisionStatus]);

body!(CreateTask, "Body of `POST …/tasks`.", required ["title"], {
    "title": fields::title(),
    "description": fields::body_text(),
    "project_id": fields::project_id(),
});

body!(UpdateTask, "Body of `PATCH …/tasks/{id}`.", required [], {
    "title": fields::title(),
    "description": fields::body_text(),
    "status": component::<TaskStatus>("An adjacent status."),
}, refers [TaskStatus]);

body!(CreateMemory, "Body of `POST …/memories`.", required ["content"], {
    "content": fields::body_text(),
    "metadata": fields::metadata(),
});

body!(UpdateMemory, "Body of `PATCH …/memories/{id}`.", required [], {
    "content": fields::body_text(),
    "metadata": fields::metadata(),
});

body!(CreateProject, "Body of `POST …/projects`.", required ["name"], {
    "name": fields::title(),
    "repository_url": fields::url_text(),
});

body!(UpdateProject, "Body of `PATCH …/projects/{id}`.", required [], {
    "name": fields::title(),
    "repository_url": fields::url_text(),
});

body!(CreateCapsule, "Body of `POST …/capsules`.", required ["title"], {
    "title": fields::title(),
    "body": fields::body_text(),
    "scope": fields::scope(),
    "attachments": fields::links(),
});

body!(UpdateCapsule, "Body of `PATCH …/capsules/{id}`.", required [], {
    "title": fields::title(),
    "body": fields::body_text(),
    "scope": fields::scope(),
    "attachments": fields::links(),
});

body!(SupersedeCapsule, "Body of `POST …/capsules/{id}/supersede`.", required ["body"], {
    "title": fields::title(),
    "body": fields::body_text(),
    "scope": fields::scope(),
});

body!(StartImport, "Body of `POST …/projects/{id}/imports`.", required ["source"], {
    "source": fields::url_text(),
});

body!(ReportAnalysis, "Body of `POST …/pull-requests/analyses`.",
    required ["repository", "number", "findings"], {
    "repository": fields::title(),
    "number": ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .description(Some(
            "1..=2^63-1 (the document's `int64`); `7.0` counts as 7, as in JSON Schema.",
        ))
        .minimum(Some(1)),
    "findings": ArrayBuilder::new()
        .items(Ref::from_schema_name(<Finding as ToSchema>::name()))
        .max_items(Some(100)),
}, refers [Finding]);

// A finding is also part of an analysis, as returned.
body!(Finding, "One finding: a change that concerns a decision.",
    required ["decision_id", "summary"], {
    "decision_id": component::<ResourceId>("A decision of the same organization."),
    "summary": fields::summary(),
});

impl PartialSchema for ImportResult {
    fn schema() -> RefOr<Schema> {
        fields::import_result().into()
    }
}

impl ToSchema for ImportResult {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ImportResult")
    }
}
