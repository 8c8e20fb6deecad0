//! serde for the state value: Serialize, Deserialize, and reading typed
//! values out of it without going through `serde_json::Value`.

use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, Deserialize, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::value::{StateArray, StateMap, StateValue};

impl Serialize for StateValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            StateValue::Null => s.serialize_unit(),
            StateValue::Bool(b) => s.serialize_bool(*b),
            StateValue::Number(n) => n.serialize(s),
            StateValue::String(v) => s.serialize_str(v),
            StateValue::Array(a) => a.serialize(s),
            StateValue::Object(m) => m.serialize(s),
            StateValue::Lazy(lazy) => lazy.get().serialize(s),
        }
    }
}

impl Serialize for StateMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for StateArray {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for v in self.iter() {
            seq.serialize_element(v)?;
        }
        seq.end()
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = StateValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<StateValue, E> {
        Ok(StateValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<StateValue, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<StateValue, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<StateValue, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<StateValue, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<StateValue, E> {
        Ok(v.into())
    }
    fn visit_none<E>(self) -> Result<StateValue, E> {
        Ok(StateValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StateValue, D::Error> {
        Deserialize::deserialize(d)
    }
    fn visit_unit<E>(self) -> Result<StateValue, E> {
        Ok(StateValue::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StateValue, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(e) = seq.next_element::<StateValue>()? {
            v.push(e);
        }
        Ok(StateValue::Array(v.into_iter().collect()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StateValue, A::Error> {
        let mut m = StateMap::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        while let Some((k, v)) = map.next_entry::<String, StateValue>()? {
            m.insert(&k, v);
        }
        Ok(StateValue::Object(m))
    }
}

impl<'de> Deserialize<'de> for StateValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for StateMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StateValue::deserialize(d)? {
            StateValue::Object(m) => Ok(m),
            _ => Err(de::Error::custom("expected a JSON object")),
        }
    }
}

impl<'de> Deserialize<'de> for StateArray {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StateValue::deserialize(d)? {
            StateValue::Array(a) => Ok(a),
            _ => Err(de::Error::custom("expected a JSON array")),
        }
    }
}

type Error = serde_json::Error;

fn visit_map_ref<'de, V: Visitor<'de>>(m: &'de StateMap, visitor: V) -> Result<V::Value, Error> {
    let mut access = MapDeserializer::new(m.iter());
    let value = visitor.visit_map(&mut access)?;
    access.end()?;
    Ok(value)
}

fn visit_array_ref<'de, V: Visitor<'de>>(
    a: &'de StateArray,
    visitor: V,
) -> Result<V::Value, Error> {
    let mut access = SeqDeserializer::new(a.iter());
    let value = visitor.visit_seq(&mut access)?;
    access.end()?;
    Ok(value)
}

impl<'de> IntoDeserializer<'de, Error> for &'de StateValue {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

/// Reads typed values straight from the state (`T::deserialize(&value)`),
/// with serde_json's error type.
impl<'de> Deserializer<'de> for &'de StateValue {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            StateValue::Null => visitor.visit_unit(),
            StateValue::Bool(b) => visitor.visit_bool(*b),
            StateValue::Number(n) => n.deserialize_any(visitor),
            StateValue::String(s) => visitor.visit_borrowed_str(s),
            StateValue::Array(a) => visit_array_ref(a, visitor),
            StateValue::Object(m) => visit_map_ref(m, visitor),
            StateValue::Lazy(lazy) => lazy.get().deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.resolved() {
            StateValue::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.resolved() {
            StateValue::String(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            StateValue::Object(m) if m.len() == 1 => visitor.visit_enum(
                de::value::MapAccessDeserializer::new(MapDeserializer::new(m.iter())),
            ),
            _ => Err(de::Error::invalid_type(
                de::Unexpected::Other("a value that is not an enum"),
                &"a string or an object with one key",
            )),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

/// Reads a typed value straight from a state map.
impl<'de> Deserializer<'de> for &'de StateMap {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visit_map_ref(self, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}
