-- Argo CD health check for cache.cacheops.io/CacheCluster.
--
-- Argo CD runs this script in a sandboxed gopher-lua VM that opens only the
-- base, table and package libraries (plus a safe subset of os). There is no
-- string library, so the script calls no string.* function and no method on
-- a string. Every nested field is checked before use: a malformed object
-- ends as Progressing, never as a script error.
--
-- The rules, first match wins:
--   1. being deleted                               -> Progressing
--   2. no status yet, or spec not observed yet     -> Progressing
--   3. spec.paused                                 -> Suspended
--   4. Stalled=True or phase Failed                -> Degraded
--   5. phase Degraded                              -> Degraded
--   6. a disaster recovery (operation Restore)     -> Progressing
--      phase Initializing, Scaling or Upgrading    -> Progressing
--   7. phase BackupRunning: Healthy while Ready=True (a nightly backup must
--      not flip the application's health), Progressing otherwise
--   8. Ready=True                                  -> Healthy
--   9. anything else                               -> Progressing

local hs = {}

-- field returns t[key] when t is a table, nil otherwise.
local function field(t, key)
  if type(t) == "table" then
    return t[key]
  end
  return nil
end

-- condition returns the condition of type condType, or nil.
local function condition(conditions, condType)
  if type(conditions) ~= "table" then
    return nil
  end
  for _, c in ipairs(conditions) do
    if type(c) == "table" and c.type == condType then
      return c
    end
  end
  return nil
end

local function isTrue(c)
  return field(c, "status") == "True"
end

-- messageOf returns the non-empty message of condition c, or nil.
local function messageOf(c)
  local m = field(c, "message")
  if type(m) == "string" and m ~= "" then
    return m
  end
  return nil
end

-- trueMessage returns the message of c while c is True, or nil.
local function trueMessage(c)
  if isTrue(c) then
    return messageOf(c)
  end
  return nil
end

-- notTrueMessage returns the message of c unless c is True, or nil.
local function notTrueMessage(c)
  if isTrue(c) then
    return nil
  end
  return messageOf(c)
end

-- withDetail appends an optional detail sentence to lead.
local function withDetail(lead, detail)
  if detail == nil then
    return lead
  end
  return lead .. ". " .. detail
end

local function result(status, message)
  hs.status = status
  hs.message = message
  return hs
end

local metadata = field(obj, "metadata")
local spec = field(obj, "spec")
local status = field(obj, "status")
if type(status) ~= "table" then
  status = nil
end

-- 1. Deletion: the operator removes the children, then the finalizer.
local deletionTimestamp = field(metadata, "deletionTimestamp")
if deletionTimestamp ~= nil and deletionTimestamp ~= "" then
  return result("Progressing", "CacheCluster is being deleted")
end

-- 2. Nothing observed yet. A cluster without status has not been seen by the
-- operator, so even a paused one is not reported Suspended before the
-- operator has acknowledged the pause.
if status == nil then
  return result("Progressing", "Waiting for CacheCluster to be reconciled")
end
local generation = field(metadata, "generation")
local observedGeneration = status.observedGeneration
if observedGeneration == nil or (generation ~= nil and generation ~= observedGeneration) then
  return result("Progressing", "Waiting for spec to be observed")
end

-- 3. Paused: the operator changes nothing until spec.paused is unset.
if field(spec, "paused") == true then
  return result("Suspended", "CacheCluster is paused: the operator changes nothing until spec.paused is unset")
end

local conditions = status.conditions
local ready = condition(conditions, "Ready")
local stalled = condition(conditions, "Stalled")
local reconciling = condition(conditions, "Reconciling")
local degraded = condition(conditions, "Degraded")
local phase = status.phase
if type(phase) ~= "string" then
  phase = nil
end

-- 4. Stalled: nothing improves without a change in git.
if isTrue(stalled) or phase == "Failed" then
  return result("Degraded", trueMessage(stalled) or notTrueMessage(ready) or "CacheCluster has failed")
end

-- 5. Degraded: the cluster serves with fewer healthy pods or children.
if phase == "Degraded" then
  return result("Degraded", trueMessage(degraded) or notTrueMessage(ready) or "CacheCluster is degraded")
end

-- 6. The cluster is rebuilt from a backup after it lost its data, or a
-- change is rolling out.
if field(status.operation, "type") == "Restore" then
  return result("Progressing", withDetail("Restoring the latest backup after a data loss",
    trueMessage(reconciling) or messageOf(ready)))
end
if phase == "Initializing" or phase == "Scaling" or phase == "Upgrading" then
  return result("Progressing", withDetail(phase .. ": the change from git is still rolling out",
    trueMessage(reconciling) or messageOf(ready)))
end

-- 7. A backup runs beside normal service.
if phase == "BackupRunning" then
  if isTrue(ready) then
    return result("Healthy", withDetail("A backup is running; the cluster serves as usual", messageOf(ready)))
  end
  return result("Progressing", withDetail("A backup is running and the cluster is not ready yet",
    trueMessage(reconciling) or messageOf(ready)))
end

-- 8. Ready.
if isTrue(ready) then
  return result("Healthy", messageOf(ready) or "CacheCluster is ready")
end

-- 9. Anything else: Pending, or a status the operator has not filled in yet.
return result("Progressing", "Waiting for CacheCluster to be reconciled")
